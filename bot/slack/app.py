"""Bolt listeners: turn Slack payloads into typed requests and answer.

Bolt routes: the slash command by name, each button by its action id
(bot/slack/actions.py, for the commands the registry has), each form by its
callback id (submissions.py), each event by its type (events.py). Every
listener acks first (Slack's 3-second limit) and hands the rest to the
after-ack lane, where a replayed request is caught and does nothing
(bot/slack/replays.py). What Bolt cannot route gets its own answer
(``on_error``): an event Firebreak does not listen to a 200 (Slack retries
anything else), an unknown button or form Bolt's 404 and an audit entry.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
import structlog
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot import logs
from bot.chat import ChatError
from bot.core import dispatch, invalid
from bot.core.grammar import UsageError
from bot.core.request import Outcome, Request, Source
from bot.core.services import Services
from bot.slack import actions, events, shapes, submissions, teams
from bot.slack.inbound import admit, inbound_of
from bot.slack.lane import Lane
from bot.slack.replays import ALREADY, Replays
from bot.slack.shapes import BlockActions, Kind, SlashCommand, ViewSubmission

log = logs.get(__name__)


async def reply(svc: Services, response_url: str | None, outcome: Outcome) -> None:
    if not response_url or not outcome.message:
        return
    try:
        # Through the gateway's pooled session: Bolt's respond() opens a new one per reply.
        await svc.chat.respond(response_url, outcome.message)
    except (ChatError, aiohttp.ClientError, TimeoutError) as exc:  # done and audited; only the echo was lost
        log.warning("respond_failed", result=outcome.result, error=type(exc).__name__)


def _bolt_logger() -> logging.Logger:
    # Bolt's own INFO lines repeat what the edge logs once, structured (a refused signature,
    # with the body in it); its warnings and errors still come through.
    logger = logging.getLogger("firebreak.bolt")
    logger.setLevel(logging.WARNING)
    return logger


class _Admit(AsyncMiddleware):
    """Bolt middleware after its signature check, for every adapter (bot/slack/inbound.py): the
    parse into Bolt's context, then an event no listener wants gets a 200 (Slack retries anything
    else) before Bolt's authorization, whose first use calls auth.test. A class, not a function:
    Bolt calls it with no argument injection, on every request's ack path."""

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse:
        refused = admit(req)
        if refused is not None:
            return refused
        inbound = inbound_of(req.context)
        if inbound.kind in (Kind.event, Kind.rate_limited):
            event_type = inbound.body["event"]["type"] if inbound.kind is Kind.event else None
            if event_type not in events.EVENT_TYPES:
                log.info("slack_request_ignored", type=inbound.kind.value, event_type=str(event_type)[:40])
                return BoltResponse(status=200, body="")
        return await next()


def build_bolt(svc: Services, client: AsyncWebClient, signing_secret: str, lane: Lane) -> AsyncApp:
    app = AsyncApp(
        # Named: without a name Bolt reads its caller's file name from inspect.stack(), which costs
        # about 150 ms of source lookups at every start.
        name="firebreak",
        client=client,
        signing_secret=signing_secret,
        # The listeners only parse, ack and queue work on the lane, so Bolt answers when the
        # listener returns; with False it runs each listener as a task and polls every 10 ms
        # for the ack, which puts a 10 ms step and 100 wake-ups a second into every ack.
        process_before_response=True,
        raise_error_for_unhandled_request=True,  # on_error answers what no listener routes
        before_authorize=_Admit(),  # the one parse, whichever adapter the request came by
        logger=_bolt_logger(),
    )
    replays = Replays(svc.redis)

    async def run(req: Request) -> None:
        # Bound here too: the executor's own binding ends before the reply is sent.
        with structlog.contextvars.bound_contextvars(request_id=req.id, incident=req.incident_id):
            outcome = await dispatch.execute(svc, req)
            structlog.contextvars.bind_contextvars(incident=outcome.incident_id or req.incident_id)
            await reply(svc, req.response_url, outcome)

    @app.command(shapes.COMMAND)
    async def on_command(ack: AsyncAck, context: AsyncBoltContext, request: AsyncBoltRequest) -> None:
        body = inbound_of(context).model
        assert isinstance(body, SlashCommand)  # Bolt routes only slash commands here
        try:
            cmd = svc.registry.parse(body.text)
        except UsageError as e:
            await ack(text=e.render(), response_type="ephemeral")
            detail = {"text": body.text, "reason": e.message}  # scrubbed, then cut (invalid.record)

            async def record() -> None:
                await invalid.record(
                    svc, "command.invalid", actor=body.user_id, channel_id=body.channel_id, detail=detail
                )

            lane.submit(replays.once(request, Kind.command, record))
            return
        r = svc.registry.routes[cmd.name]
        await ack(text=r.ack(cmd)) if r.ack else await ack()
        req = Request(
            command=cmd,
            actor=body.user_id,
            source=Source.slash,
            channel_id=body.channel_id,
            response_url=body.response_url or None,
            trigger_id=body.trigger_id or None,
            other_team=teams.other_team(Kind.command, inbound_of(context).body, context.authorize_result),
        )

        async def already() -> None:  # the person sees that their copy was not run again
            await reply(svc, req.response_url, Outcome.refused(ALREADY))

        lane.submit(replays.once(request, Kind.command, lambda: run(req), already), request_id=req.id)

    async def on_button(ack: AsyncAck, context: AsyncBoltContext, request: AsyncBoltRequest) -> None:
        await ack()
        body = inbound_of(context).model
        assert isinstance(body, BlockActions)  # Bolt routes only block_actions here
        action, user = body.actions[0], body.user.id
        channel = body.channel.id if body.channel else None
        try:
            decoded = actions.decode(action.action_id, action.value or "")
        except ValueError:

            async def refuse() -> None:
                await invalid.record(
                    svc, "button.invalid", actor=user, channel_id=channel, detail={"action_id": action.action_id}
                )
                await reply(
                    svc,
                    body.response_url,
                    Outcome.refused("That button's value is not one Firebreak made; nothing changed."),
                )

            lane.submit(replays.once(request, Kind.action, refuse))
            return
        assert decoded is not None  # only action ids in actions.ACTIONS are routed here
        cmd, inc_id = decoded
        req = Request(
            command=cmd,
            actor=user,
            source=Source.button,
            incident_id=inc_id,
            channel_id=channel,
            response_url=body.response_url or None,
            trigger_id=body.trigger_id or None,
            message_ts=body.container.message_ts,
            message_channel=body.container.channel_id,
            other_team=teams.other_team(Kind.action, inbound_of(context).body, context.authorize_result),
        )
        lane.submit(replays.once(request, Kind.action, lambda: run(req)), request_id=req.id, incident=req.incident_id)

    commands = {r.model for r in svc.registry.routes.values()}
    for row in actions.ACTIONS:
        if row.command in commands:  # a button for a capability this app has
            app.action(row.action_id)(on_button)

    async def unknown_button(body: BlockActions) -> None:
        action_id = body.actions[0].action_id[:100]
        channel = body.channel.id if body.channel else None
        detail = {"action_id": action_id}
        await invalid.record(svc, "button.unknown", actor=body.user.id, channel_id=channel, detail=detail)
        await reply(svc, body.response_url, Outcome.refused("That button is no longer handled by Firebreak."))

    @app.error
    async def on_error(error: Exception, context: AsyncBoltContext, request: AsyncBoltRequest) -> BoltResponse | None:
        if not isinstance(error, BoltUnhandledRequestError):
            log.error("listener_failed", error=type(error).__name__, exc_info=error)
            return None  # Bolt's answer: a 500 before the ack; after it, nothing more to say
        inbound = inbound_of(context)
        if inbound.kind in (Kind.event, Kind.rate_limited):  # e.g. a message from this bot itself
            log.info("slack_request_ignored", type=inbound.kind.value)
            return BoltResponse(status=200, body="")
        body = inbound.model
        if isinstance(body, BlockActions):
            what, job = body.actions[0].action_id, lambda: unknown_button(body)
        elif isinstance(body, ViewSubmission):
            what, job = body.view.callback_id, lambda: submissions.unknown(svc, body)
        else:  # every command Bolt is given is routed (shapes.COMMAND)
            what, job = "", None
        log.warning("slack_request_unhandled", kind=inbound.kind.value, id=what[:100])
        if job is not None:
            lane.submit(replays.once(request, inbound.kind, job))
        return None  # Bolt's own 404

    submissions.install(app, svc, lane, replays)
    events.install(app, svc, lane, replays)
    return app
