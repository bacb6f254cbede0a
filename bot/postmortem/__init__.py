"""The postmortem: detection gap first, trigger apart from root cause, action items that ship (DESIGN §7)."""
