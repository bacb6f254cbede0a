"""Approve / Deny presses and the settling timer, for lever requests and grants alike.

Every refusal says why and is audited by the dispatcher (command.approve /
command.deny with the reason); nothing changes on a refused press.
"""

from __future__ import annotations

import json

from bot.approvals import grants, lever_side, notify, undo_side, views
from bot.approvals.commands import ApprovalSettle, Approve, Deny
from bot.approvals.jobs import EXPIRE_JOB
from bot.approvals.rules import details, on_card, required_seats, seat_title, seats_text
from bot.approvals.scope import FLEET
from bot.approvals.store import Ballot, Expired, Vote, VoteCode, ballots
from bot.chat import channel_ref, person
from bot.clock import hhmm
from bot.core.eligibility import eligibility
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident


def _decided(b: Ballot) -> str:
    if b.state == "revoked" and b.decided_at is None:
        return f"withdrawn by {views.who(b.ended_by)} at {views.when(b.ended_at)}"
    if b.state in ("approved", "ended", "revoked"):
        return f"approved by {views.approvers(b)} at {views.when(b.decided_at)}" + (
            f" (since {b.state})" if b.state != "approved" else ""
        )
    if b.state == "denied":
        return f"denied by {views.who(b.decided_by)} at {views.when(b.decided_at)}"
    return f"expired at {views.when(b.expires_at)}"


def _holders(inc: Incident, seats: list[str]) -> str:
    now = [person(who) for s in seats if (who := inc.holder(s))]
    return f" (now {', '.join(now)})" if now else " (nobody holds it now)"


async def _expire_now(svc: Services, b: Ballot) -> None:
    if b.kind == "lever":
        await lever_side.expired(svc, b)
    else:
        await notify.edit_card(svc, b, views.decision_line(b))


# What approvals can't do while Slack can't say who is eligible.
POWER_BLOCKED = "levers and approvals are refused"


def _cells(b: Ballot) -> list[str] | None:
    """Where the on-call counts for this approval (docs/security-model.md, "Eligibility"): the one cell its lever or
    grant acts in; None (nowhere) for the fleet context and for a grant of named levers in any cell."""
    cell = b.detail.get("cell")
    return [cell] if isinstance(cell, str) and cell and cell != FLEET else None


async def _eligible_seats(svc: Services, req: Request, inc: Incident, bid: str) -> list[str]:
    """The seats of ballot ``bid`` the voter holds and is eligible for now (roles.yaml), which the
    vote may fill; refuses when they hold some but are eligible for none. Empty: nothing to check
    here (not pending, the requester, or no seat held), and the vote script says what is wrong;
    it fills no seat then, even one the voter was given since this read (fail closed)."""
    b = await ballots(svc).get(inc.id, bid)
    if b is None or b.state != "pending" or b.requester == req.actor or svc.clock.now() >= b.expires_at:
        return []
    if not on_card(b, req.message_channel, req.message_ts):
        return []  # the vote script refuses it: no eligibility lookup for a press from elsewhere
    held = [s for s in required_seats(b.seats, b.sev1_seats, inc.sev) if inc.holder(s) == req.actor]
    if not held:
        return []
    verdicts = await eligibility(svc).check_seats(req.actor, held, _cells(b))
    ok = [s for s, v in verdicts.items() if v.ok]
    if not ok:
        v = next((v for v in verdicts.values() if v.unanswered), None) or verdicts[held[0]]
        what = "approve" if b.kind in ("lever", "undo") else "grant"
        raise Refusal(
            f"You hold {seats_text(held)} of {inc.id} but can't {what} as it: {v.refusal(POWER_BLOCKED)}",
            **details(b),
            **v.audit(),
        )
    return ok


async def _vote(svc: Services, req: Request, inc: Incident, bid: str, choice: str) -> tuple[Vote, Ballot]:
    """Cast the vote; refuse (nothing changed) unless it was recorded or decided the ballot."""
    store = ballots(svc)
    eligible = await _eligible_seats(svc, req, inc, bid)
    pressed_on = (req.message_channel, req.message_ts)
    v = await store.vote(inc.id, bid, req.actor, choice, svc.clock.now(), pressed_on, eligible)
    b = await store.get(inc.id, bid)
    base = {"request": bid, "vote": choice, "code": v.code.value}
    if v.code is VoteCode.MISSING or b is None:
        raise Refusal(f"{bid} is not an approval request of {inc.id}; nothing changed.", **base)
    base = {**details(b), "vote": choice, "code": v.code.value}
    if v.code is VoteCode.ELSEWHERE:
        where = f" in {channel_ref(v.seat)}" if v.seat else ""
        raise Refusal(
            f"That button is not on the approval card of {bid}; nothing changed. "
            f"Press {choice.capitalize()} on the card itself{where}.",
            **base,
            pressed_on={"channel": req.message_channel, "ts": req.message_ts},
        )
    seats = required_seats(b.seats, b.sev1_seats, inc.sev)
    if v.code is VoteCode.DECIDED:
        raise Refusal(f"{bid} was already {_decided(b)}; nothing changed.", **base)
    if v.code is VoteCode.EXPIRED:
        await _expire_now(svc, b)
        raise Refusal(
            f"{bid} expired at {hhmm(b.expires_at)} UTC; nothing ran. Ask again if it is still needed.", **base
        )
    if v.code is VoteCode.SELF:
        each = ", each a different person" if len(seats) > 1 else ""
        raise Refusal(f"You asked for {bid}, so you cannot decide it: {seats_text(seats)} must{each}.", **base)
    if v.code is VoteCode.VOTED:
        raise Refusal(f"You already voted on {bid}; one vote per person.", **base)
    if v.code is VoteCode.NOROLE:
        need = json.loads(v.seat)
        raise Refusal(
            f"Only {seats_text(need)} of {inc.id}{_holders(inc, need)} can decide {bid}; "
            "you hold none of those roles right now.",
            **base,
        )
    if v.code is VoteCode.FILLED:
        missing = [s for s in seats if s not in b.filled]
        raise Refusal(
            f"The {seat_title(v.seat)}'s approval of {bid} is already in (from {person(v.other)}); "
            f"it still needs {seats_text(missing)}.",
            **base,
        )
    return v, b


async def approve(svc: Services, req: Request, cmd: Approve, inc: Incident) -> Outcome:
    v, b = await _vote(svc, req, inc, cmd.request, "approve")
    audit = {**details(b), "vote": "approve", "seat": v.seat}
    if v.code is VoteCode.RECORDED:
        missing = json.loads(v.other)
        await notify.edit_card(svc, b)
        return Outcome(
            message=f"Your approval of {b.id}, {views.subject(b)}, as {seat_title(v.seat)} is recorded; "
            f"it still needs {seats_text(missing)}.",
            audit={**audit, "missing": missing},
        )
    if b.kind == "lever":
        msg, extra = await lever_side.run_approved(svc, b)
    elif b.kind == "undo":
        msg, extra = await undo_side.run_approved(svc, b)
    else:
        msg, extra = await grants.activate(svc, b)
    # Which request the press approved, as its card showed it (lever and plan digest), then what came of it.
    said = f"You approved {b.id}: {views.subject(b)}.\n{msg}"
    return Outcome(message=said, audit={**audit, "decision": "approved", "approvers": b.filled, **extra})


async def deny(svc: Services, req: Request, cmd: Deny, inc: Incident) -> Outcome:
    v, b = await _vote(svc, req, inc, cmd.request, "deny")
    if b.kind == "lever":
        await lever_side.denied(svc, b)
    else:
        await svc.scheduler.cancel(EXPIRE_JOB, b.id)
        await notify.edit_card(svc, b, views.decision_line(b))
    return Outcome(
        message=f"{b.id} denied ({views.subject(b)}); nothing was changed.",
        audit={**details(b), "vote": "deny", "seat": v.seat, "decision": "denied"},
    )


async def settle(svc: Services, req: Request, cmd: ApprovalSettle, inc: Incident) -> Outcome:
    """The window timer (or the restart sweep): expire an undecided request, or finish an approved one."""
    store = ballots(svc)
    code = await store.expire(inc.id, cmd.request, svc.clock.now())
    b = await store.get(inc.id, cmd.request)
    if b is None:
        return Outcome(message=f"{cmd.request} does not exist.", audit={"request": cmd.request, "settled": "none"})
    if code is Expired.EXPIRED:
        await _expire_now(svc, b)
        return Outcome(message=f"{b.id} expired.", audit={**details(b), "settled": "expired"})
    if b.kind in ("lever", "undo") and b.state == "approved":
        run = lever_side.run_approved if b.kind == "lever" else undo_side.run_approved
        msg, extra = await run(svc, b)
        return Outcome(message=msg, audit={**details(b), "settled": "resumed", **extra})
    return Outcome(message=f"{b.id} is {b.state}.", audit={**details(b), "settled": "none", "state": b.state})
