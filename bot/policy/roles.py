"""The seats the policy speaks of: Google IMAG plus the ML seats.

Here, below every capability, because policy files name them and the one
policy check (bot/core/authz.py) reads them.
"""

from __future__ import annotations

from typing import Protocol

from bot.chat import person

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


class Seats(Protocol):
    """Who sits where in one incident (an Incident, or any view of one)."""

    def holder(self, role: str) -> str | None: ...


def title(role: str) -> str:
    """What people call a seat: `ic` → "IC" in refusals is clearer than the long title."""
    return "IC" if role == "ic" else ROLE_TITLES.get(role, role)


def seated(inc: Seats, roles: list[str]) -> str:
    """Who sits in ``roles`` now, for a refusal: "IC: @alex; Comms lead: nobody"."""
    return "; ".join(f"{title(r)}: " + (person(who) if (who := inc.holder(r)) else "nobody") for r in roles)


def self_seat_hint(inc: Seats, actor: str, role: str) -> str | None:
    """For the IC refused for lack of a seat they can give themselves (not ic: that is a handoff)."""
    if role == "ic" or inc.holder("ic") != actor:
        return None
    return f"You're the IC: give yourself the role with `/incident role {role} {person(actor)}`."
