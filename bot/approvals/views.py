"""What approval cards say: the request with its buttons, and the decided card (plain view models).

A decided card is the same plan without buttons plus one line saying who
decided, when (UTC), and what came of it; it replaces the request in place.
The cuts below are the ones these cards have always had (the chat surface's
limits are only an outer bound), so a posted card reads the same as before.
"""

from __future__ import annotations

import json
from typing import Any

from bot.approvals.commands import Approve, Deny
from bot.approvals.rules import seat_holders, seat_title, seats_text
from bot.approvals.store import Ballot
from bot.chat import Button, Buttons, Card, Confirm, Context, Fields, Header, Press, Section, person, quote
from bot.chat.text import code, code_block, literal
from bot.chat.views import Part
from bot.clock import hhmm
from bot.core.request import IncidentView

_SECTION, _FIELD, _HEADER = 2900, 1900, 150
SHORT_DIGEST = 12  # how much of the plan digest a card and its confirmations show


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


Holders = dict[str, "str | None"]  # seat -> who holds that role in the incident now


def _seats_line(b: Ballot, holder: Holders | None = None) -> str:
    def named(seats: list[str]) -> str:
        return seats_text(seats) if holder is None else seat_holders(seats, holder)

    extra = f" (plus {named(b.sev1_seats)} at SEV1)" if b.sev1_seats else ""
    got = ", ".join(f"{person(u)} ({seat_title(s)})" for s, u in _in_seat_order(b))
    have = f" · approved so far: {got}" if got else ""
    return (
        f"Needs {named(b.seats)}{extra}, each a different person and not the requester"
        f" · expires {hhmm(b.expires_at)} UTC{have}"
    )


def _buttons(b: Ballot) -> Buttons:
    # The press carries only the request id; the incident is the channel's (Press incident None).
    what = {"lever": "run it at once", "undo": "return the node at once"}.get(b.kind, "start the grant at once")
    return Buttons(
        f"approval:{b.id}",
        (
            Button(
                "Approve",
                Press(Approve(request=b.id)),
                style="primary",
                confirm=Confirm("Approve?", f"Approving {b.id} will {what}.", confirm="Approve", deny="Cancel"),
            ),
            Button("Deny", Press(Deny(request=b.id)), style="danger"),
        ),
    )


def lever_text(b: Ballot) -> str:
    d = b.detail
    return f"{b.id} needs approval: {d['lever']} {quote(d['target'])} ({d['cell']}), asked by {person(b.requester)}"


def _pre_state(pre: Any) -> str:
    """One line per field the lever touches: its value before, or (absent)."""
    if not isinstance(pre, dict) or not pre:
        return "none captured"

    def shown(v: Any) -> str:
        if isinstance(v, dict) and set(v) in ({"$absent"}, {"$present"}):
            return "(absent)" if "$absent" in v else "(present)"
        return json.dumps(v, sort_keys=True)

    return "\n".join(f"{p.replace('~1', '/').replace('~0', '~')}: {shown(v)}" for p, v in sorted(pre.items()))


def _blast(d: dict[str, Any]) -> str:
    if d["cell"] == "fleet":
        where = "fleet-wide (the fleet context: every cell it reaches)"
    else:
        where = f"one object in cell {d['cell']}"
    return f"{where}; {literal(d['effect'])}" if d.get("effect") else where


def _facts(b: Ballot, what: str, blast: str) -> Fields:
    """A lever card's four facts: what, where, who asked, and its blast radius."""
    return Fields(
        (
            _cut(f"*What*\n{what}", _FIELD),
            _cut(f"*Where*\n{b.detail['cell']}", _FIELD),
            _cut(f"*Asked by*\n{person(b.requester)}", _FIELD),
            _cut(f"*Blast radius*\n{blast}", _FIELD),
        )
    )


def _lever_body(b: Ballot) -> list[Part]:
    d = b.detail
    why = "; ".join(d.get("reasons") or []) or "policy requires a second person"
    parts: list[Part | None] = [
        Header(_cut(f"{b.id}: {d['lever']} needs approval", _HEADER)),
        _facts(b, f"{d['lever']} {quote(d['target'])}", _blast(d)),
        Section(_cut(f"*Why approval*: {why}", _SECTION)),
        # What pulling it costs, read at plan time (levers/price.py): part of what is approved.
        Section(_cut(f"*Price*\n{literal(d['price'])}", _SECTION)) if d.get("price") else None,
        # Cluster data (names, annotations in the pre-state) stays inside its block or span: escaped,
        # no backtick to end it (bot/chat/text.py), and cut inside the fence, never through it.
        Section(f"*kubectl equivalent*\n{code_block(d.get('kubectl', ''), 1200)}"),
        Section(
            f"*API call*: {code(d.get('api', ''), 400)}\n"
            f"*Pre-state*\n{code_block(_pre_state(d.get('pre_state')), 1400)}"
        ),
        Context(
            (
                _cut(
                    f"plan digest `{b.digest[:SHORT_DIGEST]}` · the approval holds only for this plan "
                    "and pre-state (and price); if the target changes it will not run",
                    _SECTION,
                ),
            )
        ),
    ]
    return [p for p in parts if p is not None]


def lever_request(b: Ballot, holder: Holders | None = None) -> Card:
    return Card.of(*_lever_body(b), Context((_cut(_seats_line(b, holder), _SECTION),)), _buttons(b))


def grant_text(b: Ballot) -> str:
    d = b.detail
    return f"{b.id} break-glass for {person(b.requester)}: {d['describe']}, {d['minutes']} min"


def _grant_body(b: Ballot) -> list[Part]:
    d = b.detail
    return [
        Header(_cut(f"{b.id}: break-glass request", _HEADER)),
        Fields(
            (
                _cut(f"*For*\n{person(b.requester)}", _FIELD),
                _cut(f"*Scope*\n{d['describe']}", _FIELD),
                _cut(f"*How long*\n{d['minutes']} min from approval", _FIELD),
                # The requester's own words: quoted, so a reason never pings or links.
                _cut(f"*Reason*\n{quote(d['reason'])}", _FIELD),
            )
        ),
        Context(("Only Firebreak's own levers; every pull is posted to the security channel.",)),
    ]


def grant_request(b: Ballot, holder: Holders | None = None) -> Card:
    return Card.of(*_grant_body(b), Context((_cut(_seats_line(b, holder), _SECTION),)), _buttons(b))


def undo_text(b: Ballot) -> str:
    d = b.detail
    return (
        f"{b.id} needs approval: return {quote(d['target'])} ({d['cell']}) to the pool, undoing {d['undoes']}, "
        f"asked by {person(b.requester)}"
    )


def _undo_body(b: Ballot) -> list[Part]:
    """An undo over a failing node return check (levers/returngate.py): what the check found."""
    d = b.detail
    return [
        Header(_cut(f"{b.id}: return {d['target']} over a failing check", _HEADER)),
        _facts(
            b,
            f"undo {d['undoes']} ({d['lever']} {quote(d['target'])})",
            f"the node takes work again; {literal(d.get('effect') or '')}",
        ),
        # What came from the cluster and Prometheus is quoted where it was read (levers/returngate.py).
        Section(_cut(f"*The node's check failed*: {d['found']}", _SECTION)),
        Context(("Approving returns the node as it is now: the check is not made again.",)),
    ]


def undo_request(b: Ballot, holder: Holders | None = None) -> Card:
    return Card.of(*_undo_body(b), Context((_cut(_seats_line(b, holder), _SECTION),)), _buttons(b))


def pending(b: Ballot, holder: Holders | None = None) -> Card:
    """The request card again, with the approvals recorded so far."""
    if b.kind == "undo":
        return undo_request(b, holder)
    return lever_request(b, holder) if b.kind == "lever" else grant_request(b, holder)


def holders_of(b: Ballot, inc: IncidentView) -> Holders:
    """Who sits in each of the ballot's seats now."""
    return {s: inc.holder(s) for s in [*b.seats, *b.sev1_seats]}


def decided(b: Ballot, line: str) -> Card:
    body = _lever_body(b) if b.kind == "lever" else _undo_body(b) if b.kind == "undo" else _grant_body(b)
    return Card.of(*body, Section(_cut(line, _SECTION)))


def subject(b: Ballot) -> str:
    """What a vote was cast on, for the voter's confirmation: the lever and the plan digest the card
    showed, so they can tell it is the request they read."""
    d = b.detail
    plan = f", plan `{b.digest[:SHORT_DIGEST]}`" if b.digest else ""
    if b.kind == "lever":
        return f"{d['lever']} {quote(d['target'])} ({d['cell']}{plan})"
    if b.kind == "undo":
        return f"undo {d['undoes']}: return {quote(d['target'])} ({d['cell']}{plan})"
    return f"break-glass for {person(b.requester)}: {d['describe']}, {d['minutes']} min"


def text(b: Ballot) -> str:
    return lever_text(b) if b.kind == "lever" else undo_text(b) if b.kind == "undo" else grant_text(b)


def _in_seat_order(b: Ballot) -> list[tuple[str, str]]:
    # The vote script stores seats as a JSON object (no order): show them in policy order.
    order = [*b.seats, *b.sev1_seats]
    return sorted(b.filled.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def who(user: str | None) -> str:
    """Whoever decided or ended a ballot, named (the store sets them with the state; missing only
    from a damaged record)."""
    return person(user) if user else "someone unrecorded"


def approvers(b: Ballot) -> str:
    return " and ".join(f"{person(u)} ({seat_title(s)})" for s, u in _in_seat_order(b)) or who(b.decided_by)


def when(ts: float | None) -> str:
    return f"{hhmm(ts)} UTC" if ts is not None else "an unknown time"


def decision_line(b: Ballot, outcome: str = "") -> str:
    tail = f" → {outcome}" if outcome else ""
    if b.state == "approved":
        return f":white_check_mark: Approved by {approvers(b)} at {when(b.decided_at)}{tail}"
    if b.state == "denied":
        return f":no_entry: Denied by {who(b.decided_by)} at {when(b.decided_at)}; nothing was changed."
    if b.state == "expired":
        return f":hourglass: Expired at {when(b.expires_at)} without approval; nothing was changed."
    if b.state == "ended":
        return f":lock: Grant ended at {when(b.grant_expires_at)} (time is up).{tail}"
    if b.state == "revoked":
        return f":lock: Revoked by {who(b.ended_by)} at {when(b.ended_at)}.{tail}"
    return _seats_line(b)
