"""Firebreak: the Slack surface and the incident domain."""
