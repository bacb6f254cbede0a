"""Signals in: Alertmanager's webhook opens and feeds incidents (DESIGN §7 "Signals in")."""
