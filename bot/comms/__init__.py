"""Comms: status updates, cadence reminders, public-granularity and secret checks."""
