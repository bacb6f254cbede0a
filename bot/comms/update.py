"""`/incident update <text>`: post a status update and reset the cadence."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.clock import hhmm
from bot.core.grammar import Spec
from bot.core.registry import route
from bot.core.request import Outcome, Refusal, Request
from bot.incidents.commands import Update
from bot.incidents.models import Incident
from bot.incidents.views import announce, joined, refresh_card

if TYPE_CHECKING:
    from bot.core.services import Services


@route(Update, spec=Spec("/incident update <text>", rest="text", rest_raw=True),
       summary="post a status update; resets the cadence")
async def update(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Update = req.command  # type: ignore[assignment]
    assert inc is not None
    now = svc.clock.now()
    change = await svc.incidents.record_update(inc.id, cmd.text, now, svc.policy.cadence.interval_minutes)
    if change.code != 1:
        raise Refusal(f"{inc.id} is resolved; updates now go in the postmortem.")
    warn = await announce(svc, inc.id, f":mega: *Update* from <@{req.actor}> ({inc.id}, SEV{inc.sev}): {cmd.text}")
    warn2 = await refresh_card(svc, inc.id)
    due = f" Next update due {hhmm(change.before)} UTC." if change.before else ""
    return Outcome(message=joined(f"Update posted.{due}", warn, warn2), audit={"next_update_due": change.before})
