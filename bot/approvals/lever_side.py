"""What the levers ask of approvals (levers.hooks), and what each decision does to a lever request.

The lever record (levers.requests, kept by levers.store) has its own state;
the ballot decides and the record follows through the levers package's
compare-and-set. After the deciding vote, `execute_approved` is called; its
own CAS on approved -> executing makes a second call (a retry, another
process, the restart sweep) a no-op, and it re-plans and refuses to run if
the digest the approvers saw no longer matches the target.

Grants: levers look one up when the user lacks the lever's role (`grant_for`),
ask again just before a stored request runs (`grant_active`), and report
every use (`grant_used`), which goes to the security channel.
"""

from __future__ import annotations

from typing import Any

from bot.approvals import notify, views
from bot.approvals.jobs import EXPIRE_JOB
from bot.approvals.rules import active, details, grant_scope
from bot.approvals.store import Ballot, ballots
from bot.chat import person, quote
from bot.clock import hhmm, iso
from bot.core.request import SYSTEM_ACTOR, IncidentView
from bot.core.services import Services
from levers import executor, hooks, messages
from levers.requests import LeverRequest, LeverState
from levers.store import lever_store

# Record states in which an approved request has not run yet.
NOT_RUN = {LeverState.pending_approval, LeverState.approved}
FINISHED = {LeverState.done, LeverState.failed, LeverState.stale}


def _detail(rec: LeverRequest) -> dict[str, Any]:
    plan = rec.plan or {}
    return {
        "lever": rec.lever,
        "target": rec.target,
        "cell": rec.cell,
        "params": rec.params,
        "kubectl": plan.get("kubectl", ""),
        "api": f"{plan.get('method', '')} {plan.get('path', '')} ({plan.get('content_type', '')})",
        "effect": plan.get("effect"),
        "pre_state": rec.pre_state,
        "reasons": list(rec.needs_approval or []),
        "price": messages.price_line(rec),  # the card escapes it (views)
    }


async def request_approval(svc: Services, inc: IncidentView, rec: LeverRequest) -> None:
    """APPROVAL_REQUESTED: open a ballot, post the card, start the window."""
    pol = svc.policy.approvals.lever
    now = svc.clock.now()
    b = Ballot(
        id=rec.id,
        kind="lever",
        incident=inc.id,
        requester=rec.requester,
        created_at=now,
        expires_at=now + pol.window_minutes * 60,
        seats=list(pol.approvers),
        digest=rec.digest,
        detail=_detail(rec),
    )
    if not await ballots(svc).create(b):
        return  # the hook ran already for this request: one ballot, one card
    await svc.scheduler.schedule(EXPIRE_JOB, b.id, b.expires_at, {"incident": inc.id})
    await svc.audit.append(
        "approval.requested",
        actor=rec.requester,
        incident=inc.id,
        detail={
            **details(b),
            "lever": rec.lever,
            "target": rec.target,
            "cell": rec.cell,
            "seats": b.seats,
            "expires_at": iso(b.expires_at),
            "kubectl": b.detail["kubectl"],
        },
    )
    await notify.post_card(
        svc,
        inc,
        b,
        "approval card",
        views.lever_text(b),
        views.lever_request(b, views.holders_of(b, inc)),
        f"it needs approval, so nothing will run; it expires at {hhmm(b.expires_at)} UTC. Try the lever again.",
    )


async def run_approved(svc: Services, b: Ballot) -> tuple[str, dict[str, Any]]:
    """Move the record to approved (if the vote's process died first) and execute it once."""
    store = lever_store(svc)
    await store.transition(
        b.id,
        {LeverState.pending_approval},
        LeverState.approved,
        approved_by=b.decided_by or "",
        approved_at=b.decided_at or svc.clock.now(),
    )
    rec = await store.get(b.id)
    if rec is None or rec.state not in NOT_RUN:
        state = rec.state if rec else "missing"
        return f"{b.id} is already {state}; nothing more to do.", {"state": state}
    await notify.edit_card(svc, b, views.decision_line(b, "executing…"))
    res = await executor.execute_approved(svc, b.id, b.decided_by or SYSTEM_ACTOR)
    # Whoever ran it, the record's result is the outcome (a losing caller only sees "already done").
    rec = await store.get(b.id)
    said = (rec.result or {}).get("message") if rec else None
    if rec is not None and rec.state in FINISHED:
        await svc.scheduler.cancel(EXPIRE_JOB, b.id)  # settled: the window timer has nothing left to do
        if said:
            await notify.edit_card(svc, b, views.decision_line(b, said))
    return said or res.message, {"state": rec.state if rec else (res.state or "missing"), "ok": res.ok}


async def _grant_report(svc: Services, b: Ballot, outcome: str) -> None:
    """A request made under a grant: its end without running goes to the security channel too."""
    rec = await lever_store(svc).get(b.id)
    if rec is not None:
        await hooks.grant_used(svc, rec, rec.grant_id, outcome)


async def denied(svc: Services, b: Ballot) -> None:
    await lever_store(svc).transition(b.id, {LeverState.pending_approval}, LeverState.denied)
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, views.decision_line(b))
    await _grant_report(svc, b, f"denied by {views.who(b.decided_by)}; nothing changed")


async def expired(svc: Services, b: Ballot, line: str | None = None) -> None:
    """The window ran out, or (line given) the incident was resolved first."""
    await lever_store(svc).transition(b.id, {LeverState.pending_approval}, LeverState.expired)
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, line or views.decision_line(b))
    why = line or f"expired at {hhmm(b.expires_at)} UTC without approval"
    await _grant_report(svc, b, f"{why}; nothing changed")


async def reconciled(svc: Services, rec: LeverRequest) -> None:
    """RECONCILED: a restart settled a request a dead process left running: say so on its card."""
    b = await ballots(svc).get(rec.incident, rec.id)
    said = (rec.result or {}).get("message")
    if b is not None and b.kind == "lever" and said:
        await svc.scheduler.cancel(EXPIRE_JOB, b.id)
        await notify.edit_card(svc, b, views.decision_line(b, said))


# Grants, as the levers see them ---------------------------------------------------------------


async def grant_for(svc: Services, inc: IncidentView | None, user: str, lever: str, cell: str) -> str | None:
    """GRANT_PROVIDER: an active grant of this user covering (lever, cell), checked now."""
    if inc is None:
        return None
    now = svc.clock.now()
    for b in await ballots(svc).all(inc.id):
        if b.requester == user and active(b, now) and grant_scope(b).covers(lever, cell):
            return b.id
    return None


async def grant_active(
    svc: Services, inc: IncidentView | None, grant_id: str, user: str, lever: str, cell: str
) -> bool:
    """GRANT_ACTIVE: this very grant, for this user, lever and cell, is active now."""
    b = await ballots(svc).get(inc.id, grant_id) if inc is not None else None
    return b is not None and b.requester == user and active(b, svc.clock.now()) and grant_scope(b).covers(lever, cell)


async def grant_used(
    svc: Services, inc: IncidentView | None, rec: LeverRequest, grant_id: str, outcome: str | None = None
) -> None:
    """GRANT_USED: every pull (or undo) under a grant goes to the security channel and the audit log,
    whatever came of it (refused, dry run, pending approval, denied, expired, done, failed, undone)."""
    where = inc.id if inc else rec.incident
    b = await ballots(svc).get(where, grant_id)
    who = b.requester if b else rec.requester  # only the grantee can act under their grant
    now = await lever_store(svc).get(rec.id)
    state = now.state if now else rec.state
    verb = "undid" if state is LeverState.undone else "pulled"
    said = outcome or f"now {state}"
    posted = await notify.to_security(
        svc,
        f":rotating_light: {grant_id} used in {where}: {person(who)} {verb} {rec.lever} {quote(rec.target)} "
        # A refused pull's target and refusal may hold what the grantee typed: quoted (idempotent).
        f"({rec.cell}), {rec.id} {quote(said)}.",
    )
    await svc.audit.append(
        "breakglass.used",
        actor=who,
        incident=where,
        detail={
            "grant": grant_id,
            **rec.ids(),
            "state": state,
            "outcome": said,
            "security_posted": posted,
        },
    )
