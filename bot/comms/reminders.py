"""Cadence reminders and escalations (system requests from the scheduler's jobs, jobs.py), and the
reminder's Snooze button.

Each posts only if the incident's next_update_due still equals the due it was
scheduled for, and only once per due (a dedupe mark claimed atomically in Redis).
"""

from __future__ import annotations

from bot import metrics
from bot.chat import HERE, Card, ChatError, person
from bot.clock import hhmm, iso
from bot.comms import timers, views
from bot.comms.commands import Escalate, Remind, Snooze
from bot.comms.store import Snoozed, store
from bot.comms.system import Once
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident, Status
from bot.incidents.posts import announce, joined, refresh_card
from bot.store import Keys


def _check_due(inc: Incident, due: float) -> None:
    if inc.status is not Status.active or inc.next_update_due is None:
        raise Refusal(f"{inc.id} is {inc.status.value}; no update is due.", skipped="not_active")
    if abs(inc.next_update_due - due) > 1e-3:
        raise Refusal(f"{inc.id}'s update due moved to {iso(inc.next_update_due)}.", skipped="due_moved")


def _mention(user: str | None) -> str:
    return person(user) if user else HERE


async def _post_once(svc: Services, inc: Incident, mark: str, text: str, card: Card | None = None) -> Outcome | bool:
    """Post once per mark; on a Slack failure release the mark and ask for a retry (the error Outcome).
    A post that a dead claimer made before it could mark it done is found (it carries the mark), not
    made again: True then, False when this call posted."""
    once = Once(svc, mark)
    if not await once.claim():
        raise Refusal("Already posted for this due.", skipped="duplicate")
    assert inc.channel_id  # every incident gets its channel before it is stored
    if await once.landed_before(inc.channel_id):
        await once.done()
        return True
    try:
        await svc.chat.post(inc.channel_id, text, card, mark=mark)
    except ChatError as f:
        await once.release()
        return Outcome(
            result="error",
            message=f"Slack refused the post ({f.error}); it will be retried.",
            audit={"slack_error": f.error},
        )
    await once.done()
    return False


def _found(earlier: bool) -> dict[str, bool]:
    """Audit detail when the post was found in the channel (made by a claimer that died) instead of made."""
    return {"found_posted": True} if earlier else {}


async def remind(svc: Services, req: Request, cmd: Remind, inc: Incident) -> Outcome:
    due, now = float(cmd.due), svc.clock.now()
    try:
        _check_due(inc, due)
    except Refusal as r:
        if r.audit.get("skipped") == "due_moved" and inc.next_update_due is not None:
            # A stale job (lost a race with a newer sync): put the reminder where it belongs.
            await svc.scheduler.schedule(timers.REMIND, inc.id, inc.next_update_due, {"due": repr(inc.next_update_due)})
        raise
    who = inc.holder("comms") or inc.holder("ic")
    cad = svc.policy.cadence
    text = (
        f":alarm_clock: {_mention(who)} update due for {inc.id} (SEV{inc.sev}) at {hhmm(due)} UTC. "
        f"Post one now; the IC is told if it is {cad.escalate_after_minutes:g} min overdue."
    )
    posted = await _post_once(
        svc,
        inc,
        Keys.comms(inc.id, f"reminded:{cmd.due}"),
        text,
        views.reminder_card(text, inc.id, cmd.due, cad.snooze_minutes),
    )
    if isinstance(posted, Outcome):
        return posted
    await svc.scheduler.schedule(timers.ESCALATE, inc.id, timers.escalation_at(due, 1, cad, inc.sev), {"due": cmd.due})
    metrics.reminder_posted("remind", svc.clock.now() - due, cmd.late, svc.scheduler.tolerance)
    return Outcome(
        message="reminder posted",
        audit={"due": iso(due), "to": who, "late": cmd.late, "lateness_s": round(now - due, 3), **_found(posted)},
    )


async def escalate(svc: Services, req: Request, cmd: Escalate, inc: Incident) -> Outcome:
    due, now = float(cmd.due), svc.clock.now()
    _check_due(inc, due)
    ic, comms = inc.holder("ic"), inc.holder("comms")
    also = f" (reminder went to {person(comms)})" if comms and comms != ic else ""
    still = "still " if cmd.round > 1 else ""
    text = (
        f":rotating_light: {_mention(ic)} {inc.id}'s update is {still}overdue: it was due {hhmm(due)} UTC"
        f"{also}. Post one with `/incident update <text>`, or hand Comms to someone who can."
    )
    mark = f"escalated:{cmd.due}" + (f":{cmd.round}" if cmd.round > 1 else "")
    posted = await _post_once(svc, inc, Keys.comms(inc.id, mark), text)
    if isinstance(posted, Outcome):
        return posted
    cad = svc.policy.cadence
    # Until an update is posted (the due moves) or the incident stops being active.
    await svc.scheduler.schedule(
        timers.ESCALATE,
        inc.id,
        timers.escalation_at(due, cmd.round + 1, cad, inc.sev),
        {"due": cmd.due, "round": cmd.round + 1},
    )
    fire_at = timers.escalation_at(due, cmd.round, cad, inc.sev)
    metrics.reminder_posted("escalate", svc.clock.now() - fire_at, cmd.late, svc.scheduler.tolerance)
    return Outcome(
        message="escalated",
        audit={
            "due": iso(due),
            "to": ic,
            "late": cmd.late,
            "round": cmd.round,
            "lateness_s": round(now - fire_at, 3),
            **_found(posted),
        },
    )


async def snooze(svc: Services, req: Request, cmd: Snooze, inc: Incident) -> Outcome:
    """The reminder's Snooze: push this very due out by the policy's snooze (an older reminder's
    button finds the due moved and does nothing)."""
    minutes = svc.policy.cadence.snooze_minutes
    new_due = svc.clock.now() + minutes * 60
    got = await store(svc).snooze(inc.id, cmd.due, new_due)
    if got.code is Snoozed.DUE_MOVED:
        now_due = f"next update due {hhmm(float(got.current))} UTC" if got.current else "no update due"
        raise Refusal(f"That reminder is no longer current ({now_due}): an update or snooze came first.")
    if got.code is not Snoozed.SNOOZED:
        raise Refusal(f"{inc.id} is {inc.status.value}; no update is due.")
    warn = await announce(
        svc, inc.id, f":zzz: {person(req.actor)} snoozed the {inc.id} update reminder to {hhmm(new_due)} UTC."
    )
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(
        message=joined(f"Snoozed {minutes:g} min: next update due {hhmm(new_due)} UTC.", warn, warn2),
        audit={"due_from": cmd.due, "due_to": repr(new_due)},
    )
