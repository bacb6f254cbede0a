"""Break-glass: `/incident breakglass` (request or revoke), starting a grant, its end, its status line.

A grant is a ballot of kind "breakglass": approved means active until
grant_expires_at. The reaper (a scheduler job, once across replicas, kept
across restarts) ends it on time, and every lookup checks the time again, so
a late or lost reaper never extends a grant. The lookups the levers make are
in lever_side.py.
"""

from __future__ import annotations

from typing import Any

from bot.approvals import notify, scope, views
from bot.approvals.commands import Breakglass, BreakglassEnd
from bot.approvals.jobs import EXPIRE_JOB, REAP_JOB
from bot.approvals.rules import active, details, needs_text, required_seats, seats_text, within
from bot.approvals.store import Ballot, GrantEnded, Revoked, ballots
from bot.chat import person, quote
from bot.clock import hhmm, iso
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident
from levers.base import rule_of
from levers.catalogue import LEVERS


async def breakglass(svc: Services, req: Request, cmd: Breakglass, inc: Incident) -> Outcome:
    if cmd.revoke:
        return await _revoke(svc, req, inc, cmd.revoke)
    pol = svc.policy.approvals.breakglass
    assert cmd.scope and cmd.minutes and cmd.reason  # the command's validator fills all three
    if cmd.minutes > pol.max_minutes:
        raise Refusal(
            f"Break-glass lasts at most {pol.max_minutes} minutes (policy); ask again with {pol.max_minutes} or less."
        )
    try:
        sc = scope.parse(cmd.scope, list(LEVERS))
    except scope.ScopeError as e:
        raise Refusal(str(e)) from None
    seats = required_seats(list(pol.approvers), list(pol.sev1_approvers), inc.sev)
    if "ic" in seats and inc.holder("ic") == req.actor:
        raise Refusal(_ic_hint(svc, sc, req.actor))
    now = svc.clock.now()
    store = ballots(svc)
    bid = await store.next_grant_id()
    b = Ballot(
        id=bid,
        kind="breakglass",
        incident=inc.id,
        requester=req.actor,
        created_at=now,
        expires_at=now + pol.window_minutes * 60,
        seats=list(pol.approvers),
        sev1_seats=list(pol.sev1_approvers),
        grant_seconds=cmd.minutes * 60,
        detail={
            "scope": sc.text(),
            "describe": sc.describe(),
            "levers": list(sc.levers),
            "cell": sc.cell,
            "fleet": sc.fleet,
            "minutes": cmd.minutes,
            "reason": cmd.reason,
        },
    )
    await store.create(b)
    await svc.scheduler.schedule(EXPIRE_JOB, bid, b.expires_at, {"incident": inc.id})
    await notify.post_card(
        svc,
        inc,
        b,
        "request card",
        views.grant_text(b),
        views.grant_request(b, views.holders_of(b, inc)),
        f"it grants nothing and expires at {hhmm(b.expires_at)} UTC. Try again.",
    )
    posted = await notify.to_security(
        svc,
        f":rotating_light: {bid} break-glass requested in {inc.id} by {person(req.actor)}: "
        f"{sc.describe()} for {cmd.minutes} min. Reason: {quote(cmd.reason)}",
    )
    need, fix = needs_text(seats, {s: inc.holder(s) for s in seats}, req.actor)
    first = f" Seat them first: {'; '.join(f'`{f}`' for f in fix)}." if fix else ""
    return Outcome(
        message=f"{bid} requested: {sc.describe()} for {cmd.minutes} min from approval; nothing granted yet. "
        f"It needs {need} by {hhmm(b.expires_at)} UTC.{first}{notify.unposted(posted)}",
        audit={
            **details(b),
            "scope": sc.text(),
            "minutes": cmd.minutes,
            "seats": b.seats,
            "sev1_seats": b.sev1_seats,
            "expires_at": iso(b.expires_at),
            "security_posted": posted,
        },
    )


def _ic_hint(svc: Services, sc: scope.Scope, actor: str) -> str:
    """The IC can't approve their own grant, and needs none: they can seat themselves."""
    names = sc.levers or tuple(LEVERS)
    roles = list(dict.fromkeys(r for n in names for r in rule_of(svc.policy.levers, LEVERS[n]).roles))
    other = f" (or {', '.join(roles[1:])})" if len(roles) > 1 else ""
    return (
        f"Not requested, nothing changed: you're the IC, so you can't approve your own break-glass. "
        f"Take the role instead: `/incident role {roles[0] if roles else 'ops'} {person(actor)}`{other} "
        "(no break-glass needed)."
    )


async def activate(svc: Services, b: Ballot) -> tuple[str, dict[str, Any]]:
    """After the last required approval: start the clock on the grant."""
    assert b.grant_expires_at is not None  # the deciding vote set it with the approval
    until = hhmm(b.grant_expires_at)
    await svc.scheduler.schedule(REAP_JOB, b.id, b.grant_expires_at, {"incident": b.incident})
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, views.decision_line(b, f"active until {until} UTC"))
    what = b.detail["describe"]
    await notify.to_channel(svc, b, f":unlock: {b.id} active: {person(b.requester)} may pull {what} until {until} UTC.")
    posted = await notify.to_security(
        svc,
        f":unlock: {b.id} granted in {b.incident}: {person(b.requester)} may pull "
        f"{what} until {until} UTC; approved by {views.approvers(b)}.",
    )
    return (
        f"{b.id} approved: {person(b.requester)} may pull {what} until {until} UTC.{notify.unposted(posted)}",
        {"grant_expires_at": iso(b.grant_expires_at), "approvers": b.filled, "security_posted": posted},
    )


async def _revoke(svc: Services, req: Request, inc: Incident, bid: str) -> Outcome:
    now = svc.clock.now()
    revokers = svc.policy.approvals.breakglass.revokers
    code, state = await ballots(svc).revoke(inc.id, bid, req.actor, now, revokers)
    if code is Revoked.MISSING:
        raise Refusal(f"{quote(bid)} is not a break-glass grant of {inc.id}.", grant=bid)
    if code is Revoked.NOT_LIVE:
        raise Refusal(f"{bid} is already {state}; there is nothing to revoke.", grant=bid)
    if code is Revoked.NOT_ALLOWED:
        raise Refusal(f"Only the grantee or {seats_text(revokers)} can revoke {bid}.", grant=bid)
    b = await ballots(svc).get(inc.id, bid)
    assert b is not None  # the script just revoked it
    await svc.scheduler.cancel(REAP_JOB, bid)
    await svc.scheduler.cancel(EXPIRE_JOB, bid)
    await notify.edit_card(svc, b, views.decision_line(b))
    revoked = f":lock: {bid} revoked by {person(req.actor)}; {person(b.requester)} no longer has it."
    await notify.to_channel(svc, b, revoked)
    posted = await notify.to_security(svc, f":lock: {bid} in {inc.id} revoked by {person(req.actor)} (was {state}).")
    return Outcome(
        message=f"{bid} revoked; {person(b.requester)} no longer has {b.detail['describe']}.{notify.unposted(posted)}",
        audit={**details(b), "grant": bid, "revoked": True, "was": state, "security_posted": posted},
    )


async def breakglass_end(svc: Services, req: Request, cmd: BreakglassEnd, inc: Incident) -> Outcome:
    now = svc.clock.now()
    code = await ballots(svc).end_grant(inc.id, cmd.grant, now)
    b = await ballots(svc).get(inc.id, cmd.grant)
    if b is None:
        return Outcome(message=f"{cmd.grant} does not exist.", audit={"grant": cmd.grant, "ended": False})
    if code is not GrantEnded.ENDED:
        if active(b, now):
            # Delivered early (a clock step): come back at the real end.
            assert b.grant_expires_at is not None
            await svc.scheduler.schedule(REAP_JOB, b.id, b.grant_expires_at, {"incident": inc.id})
        return Outcome(message=f"{b.id} is {b.state}; nothing to end.", audit={"grant": b.id, "ended": False})
    await notify.edit_card(svc, b, views.decision_line(b))
    await notify.to_channel(svc, b, f":lock: {b.id} ended: {person(b.requester)} no longer has {b.detail['describe']}.")
    posted = await notify.to_security(svc, f":lock: {b.id} in {inc.id} ended at {hhmm(now)} UTC (time is up).")
    return Outcome(
        message=f"{b.id} ended.{notify.unposted(posted)}",
        audit={
            **details(b),
            "grant": b.id,
            "ended": True,
            "grant_expires_at": iso(b.grant_expires_at),
            "security_posted": posted,
        },
    )


async def status_line(svc: Services, inc: IncidentView) -> str | None:
    """STATUS_LINE: requests awaiting approval and active grants."""
    now = svc.clock.now()
    parts = []
    for b in await ballots(svc).all(inc.id):
        if b.state == "pending" and within(now, b.expires_at):
            parts.append(f"{b.id} awaiting approval until {hhmm(b.expires_at)} UTC")
        elif active(b, now):
            assert b.grant_expires_at is not None
            parts.append(
                f"{b.id} break-glass {person(b.requester)} ({b.detail['describe']}) "
                f"until {hhmm(b.grant_expires_at)} UTC"
            )
    return ("Approvals and grants: " + "; ".join(parts)) if parts else None
