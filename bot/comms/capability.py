"""The comms capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.comms import handoffs, jobs, reminders, timeline, timers, update, watch
from bot.comms.commands import Escalate, HandoffNudge, Remind, SecretFlag, Snooze, UpdateForm
from bot.core.grammar import Spec
from bot.core.registry import Registry
from bot.core.timeline import CommandDetail
from bot.incidents.commands import Update


def register(reg: Registry) -> None:
    reg.command(
        Update,
        update.update,
        spec=Spec("/incident update <text>", rest="text", rest_raw=True),
        summary="post a status update (product × region); resets the cadence",
    )

    # The reminder's buttons, and the form "Post update" opens.
    reg.command(UpdateForm, update.update_form, summary="open the update form (button)")
    reg.command(Snooze, reminders.snooze, summary="snooze the update reminder (button)")
    reg.form(Update, update.parse_form, update.check_form)

    # Handoff nudges.
    reg.command(HandoffNudge, handoffs.nudge, summary="nudge an unaccepted handoff (scheduler)")
    reg.job(timers.NUDGE, jobs.nudge)

    # The update cadence: reminder, then escalation while overdue.
    reg.command(Remind, reminders.remind, summary="cadence reminder (scheduler)")
    reg.command(Escalate, reminders.escalate, summary="overdue update escalation (scheduler)")
    reg.job(timers.REMIND, jobs.remind)
    reg.job(timers.ESCALATE, jobs.escalate)

    # The timers follow the incident: after every request, and once at start.
    reg.observe(timers.after_request)
    reg.on_start(timers.resync_open_incidents)

    # Pasted secrets in the incident channel (bot/slack/events.py calls watch.flagged and watch.flag).
    reg.command(SecretFlag, watch.secret_flag, summary="a pasted secret was flagged (message event)")

    # How they read on the postmortem's timeline.
    reg.timeline(Update, timeline.Updated, timeline.updated)
    reg.timeline(Remind, timeline.Nudged, timeline.reminded)
    reg.timeline(Escalate, timeline.Nudged, timeline.escalated)
    reg.timeline(SecretFlag, CommandDetail, timeline.secret_flagged)
    for bookkeeping in (UpdateForm, Snooze, HandoffNudge):
        reg.timeline(bookkeeping, CommandDetail, timeline.no_event)
