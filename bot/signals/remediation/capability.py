"""The remediation alarm capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.core.registry import Registry
from bot.signals.remediation import handlers, timeline, watch
from bot.signals.remediation.commands import RemediationAlarm


def register(reg: Registry) -> None:
    """Watch each cell's GPU nodes; alarm (once per burst) when they go out for remediation too fast."""
    # One job for the deployment, rescheduled by each run; the first listing at start (the baseline).
    reg.job(watch.JOB, watch.watch)
    reg.on_start(watch.start)
    # The alarm is a system request: policy check, handler (find or open the incident, post once), one audit entry.
    reg.command_anywhere(
        RemediationAlarm, handlers.remediation_alarm, summary="GPU nodes going out too fast in a cell (watch job)"
    )
    reg.timeline(RemediationAlarm, timeline.AlarmSeen, timeline.alarm_seen)
