"""What levers ask of a grant beyond the lookup: is this very grant still active (asked again just
before an approved request runs), and the report of every use to the security channel."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.approvals import notify
from bot.approvals.grants import active, grant_scope
from levers import hooks, requests

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident
    from levers.requests import LeverRequest


async def grant_active(svc: "Services", inc: "Incident | None", grant_id: str, user: str, lever: str,
                       cell: str) -> bool:
    """GRANT_ACTIVE: this very grant, for this user, lever and cell, is active now."""
    b = await notify.ballots(svc).get(inc.id, grant_id) if inc is not None else None
    return (b is not None and b.requester == user and active(b, svc.clock.now())
            and grant_scope(b).covers(lever, cell))


async def grant_used(svc: "Services", inc: "Incident | None", rec: "LeverRequest", grant_id: str,
                     outcome: str | None = None) -> None:
    """GRANT_USED: every pull (or undo) under a grant goes to the security channel and the audit log,
    whatever came of it (refused, dry run, pending approval, denied, expired, done, failed, undone)."""
    where = inc.id if inc else rec.incident
    b = await notify.ballots(svc).get(where, grant_id)
    who = b.requester if b else rec.requester  # only the grantee can act under their grant
    now = await requests.get_request(svc.redis, rec.id)
    state = now.state if now else rec.state
    verb = "undid" if state == "undone" else "pulled"
    said = outcome or f"now {state}"
    posted = await notify.to_security(
        svc, f":rotating_light: {grant_id} used in {where}: <@{who}> {verb} {rec.lever} {rec.target} "
             f"({rec.cell}), {rec.id} {said}.")
    await svc.audit.append("breakglass.used", actor=who, incident=where, detail={
        "grant": grant_id, "request": rec.id, "lever": rec.lever, "target": rec.target, "cell": rec.cell,
        "state": state, "outcome": said, "security_posted": posted})


hooks.GRANT_ACTIVE.append(grant_active)
hooks.GRANT_USED.append(grant_used)
