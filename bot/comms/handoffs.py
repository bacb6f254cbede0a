"""Handoff nudges: a handoff not accepted in time nudges the outgoing holder."""

from __future__ import annotations

from bot.chat import ChatError, person
from bot.comms.commands import HandoffNudge
from bot.comms.system import Once
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.policy.roles import ROLE_TITLES
from bot.store import Keys


async def nudge(svc: Services, req: Request, cmd: HandoffNudge, inc: Incident) -> Outcome:
    h = await repo(svc).get_handoff(inc.id, cmd.handoff)
    if h is None or h.status != "pending" or not inc.is_open or not inc.channel_id:
        raise Refusal(f"Handoff {cmd.handoff} no longer needs a nudge.", skipped="not_pending")
    once = Once(svc, Keys.comms(inc.id, f"nudged:{h.id}"))
    if not await once.claim():
        raise Refusal("Already nudged.", skipped="duplicate")
    outgoing = h.from_user or h.requested_by
    minutes = (svc.clock.now() - h.requested_at) / 60
    holds = f"you still hold {ROLE_TITLES[h.role]}" if h.from_user else f"{ROLE_TITLES[h.role]} is still empty"
    text = (
        f":hourglass: {person(outgoing)} your handoff {h.id} of {ROLE_TITLES[h.role]} to {person(h.to_user)} "
        f"is not accepted after {minutes:.0f} min; {holds}. Ping {person(h.to_user)}, or hand it to someone else."
    )
    if await once.landed_before(inc.channel_id):  # a dead claimer's nudge landed; only its mark was missing
        await once.done()
        return Outcome(message="nudged", audit={"handoff": h.id, "to": outgoing, "found_posted": True})
    try:
        await svc.chat.post(inc.channel_id, text, mark=once.key)
    except ChatError as f:
        await once.release()
        return Outcome(result="error", message=f"Slack refused the nudge ({f.error}); it will be retried.")
    await once.done()
    return Outcome(message="nudged", audit={"handoff": h.id, "to": outgoing})
