"""Lever requests that need approval: the card, and what each decision does.

The lever record (levers/requests.py) keeps its own state; the ballot decides
and the record follows through the levers package's compare-and-set. After
the deciding vote, `execute_approved` is called; its own CAS on
approved -> executing makes a second call (a retry, another process, the
restart sweep) a no-op, and it re-plans and refuses to run if the digest the
approvers saw no longer matches the target.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot import logs
from bot.approvals import cards, notify
from bot.approvals.ballots import Ballot
from bot.clock import hhmm, iso
from levers import executor, hooks, requests

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident
    from levers.requests import LeverRequest

log = logs.get(__name__)

EXPIRE_JOB = "approval.expire"
# Record states in which an approved request has not run yet.
NOT_RUN = {"pending_approval", "approved"}
FINISHED = {"done", "failed", "stale"}


def _detail(rec: "LeverRequest") -> dict[str, Any]:
    plan = rec.plan or {}
    return {
        "lever": rec.lever, "target": rec.target, "cell": rec.cell, "params": rec.params,
        "kubectl": plan.get("kubectl", ""),
        "api": f"{plan.get('method', '')} {plan.get('path', '')} ({plan.get('content_type', '')})",
        "effect": plan.get("effect"), "pre_state": rec.pre_state,
        "reasons": list(rec.needs_approval or []),
    }


async def request_approval(svc: "Services", inc: "Incident", rec: "LeverRequest") -> None:
    """APPROVAL_REQUESTED: open a ballot, post the card, start the window."""
    pol = svc.policy.approvals.lever
    now = svc.clock.now()
    b = Ballot(id=rec.id, kind="lever", incident=inc.id, requester=rec.requester, created_at=now,
               expires_at=now + pol.window_minutes * 60, seats=list(pol.approvers), digest=rec.digest,
               detail=_detail(rec))
    if not await notify.ballots(svc).create(b):
        return  # the hook ran already for this request: one ballot, one card
    await svc.scheduler.schedule(EXPIRE_JOB, b.id, b.expires_at, {"incident": inc.id})
    await svc.audit.append("approval.requested", actor=rec.requester, incident=inc.id, detail={
        **cards.details(b), "lever": rec.lever, "target": rec.target, "cell": rec.cell,
        "seats": b.seats, "expires_at": iso(b.expires_at), "kubectl": b.detail["kubectl"]})
    await notify.post_card(svc, inc, b, "approval card", cards.lever_text(b),
                           cards.lever_request(b, cards.holders_of(b, notify.seated(inc))),
                           f"it needs approval, so nothing will run; it expires at {hhmm(b.expires_at)} UTC. "
                           "Try the lever again.")


async def run_approved(svc: "Services", b: Ballot) -> tuple[str, dict[str, Any]]:
    """Move the record to approved (if the vote's process died first) and execute it once."""
    await requests.transition(svc.redis, b.id, {"pending_approval"}, "approved",
                              approved_by=b.decided_by or "", approved_at=b.decided_at or svc.clock.now())
    rec = await requests.get_request(svc.redis, b.id)
    if rec is None or rec.state not in NOT_RUN:
        state = rec.state if rec else "missing"
        return f"{b.id} is already {state}; nothing more to do.", {"state": state}
    await notify.edit_card(svc, b, cards.decision_line(b, "executing…"))
    res = await executor.execute_approved(svc, b.id, b.decided_by or "system")
    # Whoever ran it, the record's result is the outcome (a losing caller only sees "already done").
    rec = await requests.get_request(svc.redis, b.id)
    said = (rec.result or {}).get("message") if rec else None
    if rec is not None and rec.state in FINISHED:
        await svc.scheduler.cancel(EXPIRE_JOB, b.id)  # settled: the window timer has nothing left to do
        if said:
            await notify.edit_card(svc, b, cards.decision_line(b, said))
    return said or res.message, {"state": rec.state if rec else res.state, "ok": res.ok}


async def _grant_report(svc: "Services", b: Ballot, outcome: str) -> None:
    """A request made under a grant: its end without running goes to the security channel too."""
    rec = await requests.get_request(svc.redis, b.id)
    if rec is not None:
        await hooks.grant_used(svc, rec, rec.grant_id, outcome)


async def denied(svc: "Services", b: Ballot) -> None:
    await requests.transition(svc.redis, b.id, {"pending_approval"}, "denied")
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, cards.decision_line(b))
    await _grant_report(svc, b, f"denied by <@{b.decided_by}>; nothing changed")


async def expired(svc: "Services", b: Ballot, line: str | None = None) -> None:
    """The window ran out, or (line given) the incident was resolved first."""
    await requests.transition(svc.redis, b.id, {"pending_approval"}, "expired")
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, line or cards.decision_line(b))
    why = line or f"expired at {hhmm(b.expires_at)} UTC without approval"
    await _grant_report(svc, b, f"{why}; nothing changed")


async def reconciled(svc: "Services", rec: "LeverRequest") -> None:
    """RECONCILED: a restart settled a request a dead process left running: say so on its card."""
    b = await notify.ballots(svc).get(rec.incident, rec.id)
    said = (rec.result or {}).get("message")
    if b is not None and b.kind == "lever" and said:
        await svc.scheduler.cancel(EXPIRE_JOB, b.id)
        await notify.edit_card(svc, b, cards.decision_line(b, said))


hooks.APPROVAL_REQUESTED.append(request_approval)
hooks.RECONCILED.append(reconciled)
