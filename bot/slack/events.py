"""Message events: the incident channel is a data store, so pasted secrets are flagged.

The scan is pure and runs in the listener (no I/O before Slack's ack); only a
flagged message becomes work on the after-ack lane, deduplicated by Slack's
event_id (bot/comms/watch.py).
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.comms import watch
from bot.core.services import Services
from bot.slack.lane import Lane

# The event types Firebreak listens to; any other delivery is answered 200 and dropped
# before Bolt (bot/slack/shapes.py), since Slack retries every other answer.
EVENT_TYPES = frozenset({"message"})


def install(app: AsyncApp, svc: Services, lane: Lane) -> None:
    @app.event("message")
    async def on_message(body: dict[str, Any], event: dict[str, Any]) -> None:
        found = watch.flagged(svc, event)
        if found is not None:
            event_id = body.get("event_id")
            lane.submit(lambda: watch.flag(svc, str(event_id) if event_id else None, found))
