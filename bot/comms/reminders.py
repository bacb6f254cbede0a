"""Cadence reminders and escalations: scheduler jobs that become system requests.

Each posts only if the incident's next_update_due still equals the due it was
scheduled for, and only once per due (a dedupe mark claimed atomically in Redis).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.clock import hhmm, iso
from bot.comms import cards, timers
from bot.comms.commands import Escalate, Remind
from bot.comms.system import Once, run_system
from bot.core.registry import route
from bot.core.request import Outcome, Refusal, Request
from bot.incidents.models import Incident, Status
from bot.scheduler import Job, job_handler
from bot.slack.gateway import SlackFailure
from bot.store import Keys

if TYPE_CHECKING:
    from bot.core.services import Services


def _check_due(inc: Incident, due: float) -> None:
    if inc.status is not Status.active or inc.next_update_due is None:
        raise Refusal(f"{inc.id} is {inc.status.value}; no update is due.", skipped="not_active")
    if abs(inc.next_update_due - due) > 1e-3:
        raise Refusal(f"{inc.id}'s update due moved to {iso(inc.next_update_due)}.", skipped="due_moved")


def _mention(user: str | None) -> str:
    return f"<@{user}>" if user else "<!here>"


async def _post_once(svc: "Services", inc: Incident, mark: str, text: str, blocks=None) -> Outcome | None:
    """Post once per mark; on a Slack failure release the mark and ask for a retry."""
    once = Once(svc, mark)
    if not await once.claim():
        raise Refusal("Already posted for this due.", skipped="duplicate")
    assert inc.channel_id
    try:
        await svc.slack.post(inc.channel_id, text, blocks)
    except SlackFailure as f:
        await once.release()
        return Outcome(result="error", message=f"Slack refused the post ({f.error}); it will be retried.",
                       audit={"slack_error": f.error})
    await once.done()
    return None


@route(Remind, spec=None, summary="cadence reminder (scheduler)")
async def remind(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Remind = req.command  # type: ignore[assignment]
    assert inc is not None
    due, now = float(cmd.due), svc.clock.now()
    try:
        _check_due(inc, due)
    except Refusal as r:
        if r.audit.get("skipped") == "due_moved" and inc.next_update_due is not None:
            # A stale job (lost a race with a newer sync): put the reminder where it belongs.
            await svc.scheduler.schedule(timers.REMIND, inc.id, inc.next_update_due,
                                                 {"due": repr(inc.next_update_due)})
        raise
    who = inc.holder("comms") or inc.holder("ic")
    cad = svc.policy.cadence
    text = (f":alarm_clock: {_mention(who)} update due for {inc.id} (SEV{inc.sev}) at {hhmm(due)} UTC. "
            f"Post one now; the IC is told if it is {cad.escalate_after_minutes:g} min overdue.")
    failed = await _post_once(svc, inc, Keys.comms(inc.id, f"reminded:{cmd.due}"), text,
                              cards.reminder_blocks(text, inc.id, cmd.due, cad.snooze_minutes))
    if failed:
        return failed
    await svc.scheduler.schedule(timers.ESCALATE, inc.id, timers.escalation_at(due, 1, cad, inc.sev),
                                         {"due": cmd.due})
    return Outcome(message="reminder posted", audit={"due": iso(due), "to": who, "late": cmd.late,
                                                     "lateness_s": round(now - due, 3)})


@route(Escalate, spec=None, summary="overdue update escalation (scheduler)")
async def escalate(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Escalate = req.command  # type: ignore[assignment]
    assert inc is not None
    due, now = float(cmd.due), svc.clock.now()
    _check_due(inc, due)
    ic, comms = inc.holder("ic"), inc.holder("comms")
    also = f" (reminder went to <@{comms}>)" if comms and comms != ic else ""
    still = "still " if cmd.round > 1 else ""
    text = (f":rotating_light: {_mention(ic)} {inc.id}'s update is {still}overdue: it was due {hhmm(due)} UTC"
            f"{also}. Post one with `/incident update <text>`, or hand Comms to someone who can.")
    mark = f"escalated:{cmd.due}" + (f":{cmd.round}" if cmd.round > 1 else "")
    failed = await _post_once(svc, inc, Keys.comms(inc.id, mark), text)
    if failed:
        return failed
    cad = svc.policy.cadence
    # Until an update is posted (the due moves) or the incident stops being active.
    await svc.scheduler.schedule(timers.ESCALATE, inc.id,
                                         timers.escalation_at(due, cmd.round + 1, cad, inc.sev),
                                         {"due": cmd.due, "round": cmd.round + 1})
    fire_at = timers.escalation_at(due, cmd.round, cad, inc.sev)
    return Outcome(message="escalated", audit={"due": iso(due), "to": ic, "late": cmd.late, "round": cmd.round,
                                               "lateness_s": round(now - fire_at, 3)})


@job_handler(timers.REMIND)
async def _remind_job(svc: "Services", job: Job) -> None:
    await run_system(svc, Remind(due=job.payload["due"], late=job.late), job.key)


@job_handler(timers.ESCALATE)
async def _escalate_job(svc: "Services", job: Job) -> None:
    await run_system(svc, Escalate(due=job.payload["due"], late=job.late, round=int(job.payload.get("round", 1))),
                     job.key)
