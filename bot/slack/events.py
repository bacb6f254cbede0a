"""Message events: the incident channel is a data store, so pasted secrets are flagged.

The scan is pure and runs in the listener (no I/O before Slack's ack); only a
flagged message becomes work on the after-ack lane, deduplicated by Slack's
event_id (bot/comms/watch.py) and, for a byte-for-byte replay, by bot/slack/replays.py.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.comms import watch
from bot.core.services import Services
from bot.slack.lane import Lane
from bot.slack.replays import Replays
from bot.slack.shapes import Kind

# The event types Firebreak listens to; any other delivery is answered 200 and dropped
# (bot/slack/app.py), since Slack retries every other answer.
EVENT_TYPES = frozenset({"message"})


def install(app: AsyncApp, svc: Services, lane: Lane, replays: Replays) -> None:
    @app.event("message")
    async def on_message(body: dict[str, Any], event: dict[str, Any], request: AsyncBoltRequest) -> None:
        found = watch.flagged(svc, event)
        if found is not None:
            event_id = str(body["event_id"]) if body.get("event_id") else None

            async def flag() -> None:
                await watch.flag(svc, event_id, found)

            lane.submit(replays.once(request, Kind.event, flag))
