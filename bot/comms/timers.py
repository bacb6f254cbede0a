"""Keep the comms timers (reminder, escalation, handoff nudge) in step with the incident.

The incident hash's ``next_update_due`` is the truth (its Lua scripts move it on
declare, update, SEV raise, snooze and status change). After every request on an
incident, ``sync`` reschedules the reminder when that due changed. A reminder job
carries the due it was scheduled for and posts only if it is still the due, so a
stale job can never post a wrong reminder.
"""

from __future__ import annotations

from typing import Any

from bot import logs
from bot.comms.store import store
from bot.core.request import Outcome, Request
from bot.core.services import Services
from bot.incidents.commands import Accept, Handoff
from bot.incidents.store import repo
from bot.policy.models import CadencePolicy
from bot.store import Keys

log = logs.get(__name__)

REMIND = "cadence.remind"
ESCALATE = "cadence.escalate"
NUDGE = "handoff.nudge"


def escalation_at(due: float, round_: int, cadence: CadencePolicy, sev: int) -> float:
    """When escalation ``round_`` fires: the grace after the due, then every interval."""
    return due + cadence.escalate_after_minutes * 60 + (round_ - 1) * cadence.interval_minutes[sev] * 60


async def sync(svc: Services, inc_id: str) -> str:
    """Reschedule when the due changed since the last sync; returns the due ("" when none)."""
    synced = await store(svc).sync_mark(inc_id)
    target = synced.target
    if not synced.changed:
        return target
    s = svc.scheduler
    if target != synced.previous:
        await s.cancel(ESCALATE, inc_id)  # the overdue clock restarts with the new due
    if target:
        await s.schedule(REMIND, inc_id, float(target), {"due": target})
    else:
        await s.cancel(REMIND, inc_id)
    return target


async def repair(svc: Services, inc_id: str) -> None:
    """Schedule the reminder or escalation that should be pending but is not (a process died
    between a transition and its sync, or between a reminder and its escalation).

    A job claimed meanwhile may be scheduled twice; its dedupe mark keeps the post single.
    """
    target = await sync(svc, inc_id)
    if not target:
        return
    s, due, cad = svc.scheduler, float(target), svc.policy.cadence
    payload: dict[str, Any] = {"due": target}
    marks = store(svc)
    if not await marks.is_done(Keys.comms(inc_id, f"reminded:{target}")):
        kind, at = REMIND, due
    elif not await marks.is_done(Keys.comms(inc_id, f"escalated:{target}")):
        kind, at = ESCALATE, due + cad.escalate_after_minutes * 60
    else:
        # Escalations repeat; the next round from now (a round missed while every process was down is
        # not replayed: the next one says the same).
        inc = await repo(svc).get(inc_id)
        if inc is None:
            return
        first, every = escalation_at(due, 1, cad, inc.sev), cad.interval_minutes[inc.sev] * 60
        nxt = int(max(0.0, svc.clock.now() - first) // every) + 2
        kind, at, payload = ESCALATE, escalation_at(due, nxt, cad, inc.sev), {"due": target, "round": nxt}
    if await s.pending(kind, inc_id) is None:
        await s.schedule(kind, inc_id, at, payload)


async def after_request(svc: Services, req: Request, outcome: Outcome, inc_id: str | None) -> None:
    """Observer: after every request on an incident, move the reminder with its due, and start
    or stop a handoff's nudge."""
    if inc_id is None or not outcome.ok:
        return
    await sync(svc, inc_id)
    handoff = outcome.audit.get("handoff")
    if isinstance(req.command, Handoff) and handoff:
        minutes = svc.policy.cadence.handoff_nudge_minutes
        await svc.scheduler.schedule(NUDGE, f"{inc_id}/{handoff}", svc.clock.now() + minutes * 60, {})
    elif isinstance(req.command, Accept) and handoff:
        await svc.scheduler.cancel(NUDGE, f"{inc_id}/{handoff}")


async def resync_open_incidents(svc: Services) -> None:
    """After a crash between a transition and its sync, the jobs catch up at start."""
    for inc_id in await repo(svc).open_ids():
        await repair(svc, inc_id)
