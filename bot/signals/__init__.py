"""Signals in: Alertmanager's webhook opens and feeds incidents
(docs/signals-and-postmortem.md, "Signals in: Alertmanager")."""
