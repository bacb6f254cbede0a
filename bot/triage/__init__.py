"""Triage and what changed: "what is broken" and "what changed" for an incident's cells (DESIGN §7)."""
