"""When an incident is resolved, nothing it authorised stays open.

Pending lever requests and break-glass requests expire, and active grants
end: each card is edited, each step audited, grants reported to security.
It observes finished requests (registered with ``reg.observe``) rather than
living in the incidents flow, so resolve itself stays unaware of approvals.
"""

from __future__ import annotations

from bot import logs
from bot.approvals import lever_side, notify
from bot.approvals.jobs import EXPIRE_JOB, REAP_JOB
from bot.approvals.rules import details
from bot.approvals.store import Ballot, Closed, ballots
from bot.chat import person
from bot.clock import hhmm
from bot.core.request import Outcome, Request
from bot.core.services import Services
from bot.incidents.commands import Resolved

log = logs.get(__name__)


async def _close(svc: Services, b: Ballot, code: Closed, actor: str, at: str) -> None:
    if code is Closed.EXPIRED:
        line = f":hourglass: Closed at {at} UTC: {b.incident} was resolved before a decision; nothing was changed."
        if b.kind == "lever":
            await lever_side.expired(svc, b, line)
        elif b.kind == "undo":  # nothing ran; the node stays quarantined
            await svc.scheduler.cancel(EXPIRE_JOB, b.id)
            await notify.edit_card(svc, b, line)
        else:
            await svc.scheduler.cancel(EXPIRE_JOB, b.id)
            await notify.edit_card(svc, b, line)
            await notify.to_security(
                svc,
                f":lock: {b.id} in {b.incident} closed unapproved at {at} UTC (incident resolved by {person(actor)}).",
            )
    else:
        line = f":lock: Grant ended at {at} UTC: {b.incident} was resolved."
        await svc.scheduler.cancel(REAP_JOB, b.id)
        await notify.edit_card(svc, b, line)
        await notify.to_channel(
            svc,
            b,
            f":lock: {b.id} ended: {b.incident} is resolved; "
            f"{person(b.requester)} no longer has {b.detail['describe']}.",
        )
        await notify.to_security(
            svc, f":lock: {b.id} in {b.incident} ended at {at} UTC (incident resolved by {person(actor)})."
        )
    await svc.audit.append(
        "approval.closed_at_resolve", actor=actor, incident=b.incident, detail={**details(b), "closed": code.value}
    )


async def close_on_resolve(svc: Services, req: Request, outcome: Outcome, incident: str | None) -> None:
    """Observer: after a successful `resolved`, close every ballot of the incident."""
    if not isinstance(req.command, Resolved) or outcome.result != "ok" or incident is None:
        return
    now = svc.clock.now()
    store = ballots(svc)
    for b in await store.all(incident):
        code = await store.close(incident, b.id, now, req.actor)
        if code is Closed.NOTHING:
            continue
        after = await store.get(incident, b.id)
        try:
            await _close(svc, after or b, code, req.actor, hhmm(now))
        except Exception:  # one ballot's failure leaves the others to close; the resolve stands
            log.exception("close_on_resolve_failed", request=b.id)
