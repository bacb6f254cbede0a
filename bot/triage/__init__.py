"""Triage and what changed: "what is broken" and "what changed" for an incident's cells
(docs/signals-and-postmortem.md, "Triage and what changed")."""
