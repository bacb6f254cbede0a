"""Bolt listeners: turn Slack payloads into typed requests and answer.

Every listener acks first (Slack's 3-second limit) and does the work after;
parsing is pure and fast, so a usage error is the ack itself. Slash commands
and buttons are here; form submissions in submissions.py, message events in
events.py.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot import logs
from bot.core import dispatch, invalid
from bot.core.grammar import UsageError
from bot.core.request import Outcome, Request, Source
from bot.core.services import Services
from bot.slack import actions, events, shapes, submissions
from bot.slack.lane import Lane

log = logs.get(__name__)
_ACTIONS = re.compile(r".+", re.DOTALL)  # any action id, even "\n": Bolt 404s what no listener matches


async def reply(svc: Services, response_url: str | None, outcome: Outcome) -> None:
    if not response_url or not outcome.message:
        return
    try:
        # Through the gateway's pooled session: Bolt's respond() opens a new one per reply.
        await svc.chat.respond(response_url, outcome.message)
    except Exception as exc:  # noqa: BLE001 - the action is done and audited; only the echo was lost
        log.warning("respond_failed", result=outcome.result, error=type(exc).__name__)


def build_bolt(svc: Services, client: AsyncWebClient, signing_secret: str, lane: Lane) -> AsyncApp:
    app = AsyncApp(client=client, signing_secret=signing_secret, process_before_response=False)

    async def run(req: Request) -> None:
        # Bound here too: the executor's own binding ends before the reply is sent.
        with structlog.contextvars.bound_contextvars(request_id=req.id, incident=req.incident_id):
            outcome = await dispatch.execute(svc, req)
            structlog.contextvars.bind_contextvars(incident=outcome.incident_id or req.incident_id)
            await reply(svc, req.response_url, outcome)

    @app.command(shapes.COMMAND)
    async def on_command(ack: AsyncAck, body: dict[str, Any]) -> None:
        text = body.get("text") or ""
        try:
            cmd = svc.registry.parse(text)
        except UsageError as e:
            await ack(text=e.render(), response_type="ephemeral")
            await invalid.record(
                svc,
                "command.invalid",
                actor=body.get("user_id", "unknown"),
                channel_id=body.get("channel_id"),
                detail={"text": text, "reason": e.message},  # scrubbed, then cut (invalid.record)
            )
            return
        r = svc.registry.routes[cmd.name]
        await ack(text=r.ack(cmd)) if r.ack else await ack()
        req = Request(
            command=cmd,
            actor=body["user_id"],
            source=Source.slash,
            channel_id=body.get("channel_id"),
            response_url=body.get("response_url"),
            trigger_id=body.get("trigger_id"),
        )
        lane.submit(lambda: run(req), request_id=req.id, incident=req.incident_id)

    @app.action(_ACTIONS)
    async def on_button(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        action = (body.get("actions") or [{}])[0]
        user = (body.get("user") or {}).get("id", "unknown")
        channel = (body.get("channel") or {}).get("id")
        try:
            decoded = actions.decode(str(action.get("action_id", "")), str(action.get("value", "")))
        except ValueError:
            await invalid.record(
                svc, "button.invalid", actor=user, channel_id=channel, detail={"action_id": action.get("action_id")}
            )
            await reply(
                svc,
                body.get("response_url"),
                Outcome.refused("That button's value is not one Firebreak made; nothing changed."),
            )
            return
        if decoded is None:
            await invalid.record(
                svc,
                "button.unknown",
                actor=user,
                channel_id=channel,
                detail={"action_id": str(action.get("action_id", ""))[:100]},
            )
            await reply(
                svc, body.get("response_url"), Outcome.refused("That button is no longer handled by Firebreak.")
            )
            return
        cmd, inc_id = decoded
        req = Request(
            command=cmd,
            actor=user,
            source=Source.button,
            incident_id=inc_id,
            channel_id=channel,
            response_url=body.get("response_url"),
            trigger_id=body.get("trigger_id"),
            message_ts=(body.get("container") or {}).get("message_ts"),
        )
        lane.submit(lambda: run(req), request_id=req.id, incident=req.incident_id)

    submissions.install(app, svc, lane)
    events.install(app, svc, lane)
    return app
