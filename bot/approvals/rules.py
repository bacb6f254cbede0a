"""Pure approval rules: the window, the seats, how to say who is needed, what a grant covers.

The window is half-open, [created_at, expires_at): a press one second before
expires_at counts, a press at expires_at or later is too late. A grant is
active on the same terms, [approved_at, grant_expires_at). The Lua scripts in
lua.py apply the same comparisons; these functions are for display, the
status line and the grant lookup.
"""

from __future__ import annotations

from typing import Any

from bot.approvals.scope import Scope
from bot.approvals.store import Ballot
from bot.chat import person
from bot.policy.roles import ROLE_TITLES


def within(now: float, until: float) -> bool:
    """True while `until` has not been reached (the end itself is outside)."""
    return now < until


def required_seats(seats: list[str], sev1_seats: list[str], sev: int) -> list[str]:
    """The roles that must each approve, given the incident's SEV at the press."""
    extra = [s for s in sev1_seats if s not in seats] if sev == 1 else []
    return [*seats, *extra]


def seat_title(role: str) -> str:
    return "IC" if role == "ic" else ROLE_TITLES.get(role, role)


def seats_text(seats: list[str]) -> str:
    """ "the IC", "the IC and the Security lead"."""
    names = [f"the {seat_title(s)}" for s in seats]
    if len(names) <= 1:
        return "".join(names) or "nobody"
    return ", ".join(names[:-1]) + " and " + names[-1]


def seat_holders(seats: list[str], holder: dict[str, str | None]) -> str:
    """ "the IC (U1, named) and the Security lead (nobody yet)": the seats with who sits in them now."""

    def one(s: str) -> str:
        who = holder.get(s)
        return f"the {seat_title(s)} ({person(who) if who else 'nobody yet'})"

    names = [one(s) for s in seats]
    if len(names) <= 1:
        return "".join(names) or "nobody"
    return ", ".join(names[:-1]) + " and " + names[-1]


def needs_text(seats: list[str], holder: dict[str, str | None], requester: str) -> tuple[str, list[str]]:
    """Who must approve a request, by name, and the seats nobody but the requester can fill now.

    A seat that is empty or held by the requester needs someone seated first:
    say who and the command that seats them.
    """
    parts, fix = [], []
    for s in seats:
        who = holder.get(s)
        if who and who != requester:
            parts.append(f"the {seat_title(s)} ({person(who)})")
        else:
            parts.append(f"a {seat_title(s)} other than {person(requester)}")
            fix.append(f"/incident role {s} @x")
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return text, fix


def grant_scope(b: Ballot) -> Scope:
    d = b.detail
    return Scope(levers=tuple(d.get("levers") or ()), cell=d.get("cell"), fleet=bool(d.get("fleet")))


def active(b: Ballot, now: float) -> bool:
    """A break-glass grant that is approved and whose time is not up."""
    return (
        b.kind == "breakglass"
        and b.state == "approved"
        and b.grant_expires_at is not None
        and within(now, b.grant_expires_at)
    )


def on_card(b: Ballot, channel: str | None, ts: str | None) -> bool:
    """A press counts only from the message the ballot's card was posted as (lua.VOTE checks the
    same inside the vote): a copy of the card, another message or a DM carries the same button."""
    return bool(b.card_channel and b.card_ts) and (channel, ts) == (b.card_channel, b.card_ts)


def details(b: Ballot) -> dict[str, Any]:
    """Audit detail shared by every approval entry."""
    return {"request": b.id, "kind": b.kind, "digest": b.digest or None, "requester": b.requester}
