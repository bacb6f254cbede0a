"""Incident roles: Google IMAG plus the ML seats."""
from __future__ import annotations

ROLES: tuple[str, ...] = ("ic", "ops", "comms", "scribe", "model", "capacity", "security")

ROLE_TITLES: dict[str, str] = {
    "ic": "Incident Commander",
    "ops": "Ops lead",
    "comms": "Comms lead",
    "scribe": "Scribe",
    "model": "Model/release owner",
    "capacity": "Capacity lead",
    "security": "Security lead",
}
