"""An undo that waits for approval: a node return over a failing check (levers/returngate.py).

`undo REQ-n` of a node-quarantine whose node is not Ready, or reported a fatal XID, ECC double-bit
or row-remap failure since, changes nothing and asks here (levers.hooks.UNDO_APPROVAL_REQUESTED).
The ballot is kind "undo" with its own id from the request sequence (REQ-m: the undone request's own
id may already name its pull's ballot), the lever approvers' seats and window (approvals.yaml
`lever`), and a card that says what the check found. Approved: levers.undo.restore runs once (its
done -> undoing compare-and-set makes a second run a no-op); denied or expired: nothing changed.
"""

from __future__ import annotations

from typing import Any

from bot.approvals import notify, views
from bot.approvals.jobs import EXPIRE_JOB
from bot.approvals.rules import details, within
from bot.approvals.store import Ballot, ballots
from bot.clock import hhmm, iso
from bot.core.request import IncidentView
from bot.core.services import Services
from levers import undo
from levers.base import LeverRefusal
from levers.requests import LeverRequest
from levers.store import lever_store


async def request_undo_approval(
    svc: Services, inc: IncidentView, rec: LeverRequest, requester: str, grant_id: str | None, found: str
) -> str:
    """UNDO_APPROVAL_REQUESTED: one pending ballot per undone request; its id."""
    now = svc.clock.now()
    for b in await ballots(svc).all(inc.id):
        if b.kind == "undo" and b.state == "pending" and b.detail.get("undoes") == rec.id and within(now, b.expires_at):
            return b.id
    pol = svc.policy.approvals.lever
    b = Ballot(
        id=await lever_store(svc).next_id(),
        kind="undo",
        incident=inc.id,
        requester=requester,
        created_at=now,
        expires_at=now + pol.window_minutes * 60,
        seats=list(pol.approvers),
        detail={
            "undoes": rec.id,
            "lever": rec.lever,
            "target": rec.target,
            "cell": rec.cell,
            "effect": (rec.plan or {}).get("effect"),
            "found": found,
            "grant": grant_id,
        },
    )
    await ballots(svc).create(b)
    await svc.scheduler.schedule(EXPIRE_JOB, b.id, b.expires_at, {"incident": inc.id})
    await svc.audit.append(
        "approval.requested",
        actor=requester,
        incident=inc.id,
        detail={
            **details(b),
            "undoes": rec.id,
            "lever": rec.lever,
            "target": rec.target,
            "cell": rec.cell,
            "found": found,
            "seats": b.seats,
            "expires_at": iso(b.expires_at),
        },
    )
    await notify.post_card(
        svc,
        inc,
        b,
        "approval card",
        views.undo_text(b),
        views.undo_request(b, views.holders_of(b, inc)),
        f"the undo needs approval, so nothing will run; it expires at {hhmm(b.expires_at)} UTC. Ask again.",
    )
    return b.id


async def run_approved(svc: Services, b: Ballot) -> tuple[str, dict[str, Any]]:
    """The deciding vote (or the settle timer after a crash): restore once, then close the card."""
    rec = await lever_store(svc).get(str(b.detail.get("undoes")))
    if rec is None:
        message = f"{b.detail.get('undoes')} does not exist any more; nothing was changed."
        state = "missing"
    else:
        await notify.edit_card(svc, b, views.decision_line(b, "returning the node…"))
        try:
            res = await undo.restore(
                svc, rec, b.requester, b.detail.get("grant"), checked=None, approved_by=b.decided_by or None
            )
            message, state = res.message, str(res.state)
        except LeverRefusal as e:  # not `done` any more: undone meanwhile, or being undone
            message, state = str(e), str(rec.state)
    await svc.scheduler.cancel(EXPIRE_JOB, b.id)
    await notify.edit_card(svc, b, views.decision_line(b, message))
    return message, {"undoes": b.detail.get("undoes"), "state": state}
