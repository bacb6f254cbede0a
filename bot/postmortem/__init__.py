"""The postmortem: detection gap first, trigger apart from root cause, action items that ship
(docs/signals-and-postmortem.md, "Postmortem")."""
