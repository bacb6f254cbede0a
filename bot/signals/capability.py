"""The signals capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.core.registry import Registry
from bot.signals import handlers, jobs, timeline, webhook
from bot.signals.commands import Alerts


def register(reg: Registry) -> None:
    """POST /alertmanager and what it opens, joins and posts."""
    # The webhook authenticates and records each delivery as a job, then answers (webhook.py).
    reg.web("POST", "/alertmanager", webhook.make)
    # The job turns it into one `alerts` request per group (a cell's pages, a cell's security
    # alerts), holding the group's lock: open or feed its incident, one summary per delivery.
    reg.job(jobs.DELIVERY, jobs.deliver)
    reg.command_anywhere(Alerts, handlers.alerts, summary="Alertmanager alerts for one cell (webhook job)")
    reg.timeline(Alerts, timeline.AlertsSeen, timeline.alerts_seen)
