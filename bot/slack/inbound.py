"""The two ways Slack reaches Bolt, HTTP and Socket Mode, and the one parse both go through.

Bolt builds its request's context from the body and raises on a body of the wrong shape
(bot/slack/shapes.py), so each adapter hands Bolt an empty body and what it received (a
``Delivery``); ``admit``, Bolt middleware between its signature check and its authorization
(bot/slack/app.py), parses that once into an ``Inbound`` in Bolt's context, which the
listeners read. A bad shape is refused there with one log line: over HTTP a 400 (415 for a
content type Slack does not send), over Socket Mode an ack that does nothing (Slack would
only send the envelope again).

POST /slack/events keeps only what is HTTP's, each answered with a 4xx and one log line:

1. the body is read (over aiohttp's ``client_max_size``: 413) and decoded (UTF-8, else 400);
   Slack's unsigned ``ssl_check=1`` probe goes straight to Bolt, whose ssl_check answers it 200;
2. the signature headers' shape and freshness (bot/slack/verify.py: 401), so Bolt's verifier
   can read them without raising; Bolt's request verification is the one signature check (a
   401 from it is logged here as ``signature_mismatch``).

Socket Mode (``SocketModeHandler``): the connection's app-level token is the proof, nothing is
signed; the envelope travels in the Delivery, for the replay guard's key (bot/slack/replays.py).

No I/O happens before the ack: replays are caught after it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from bot import logs
from bot.slack import shapes, verify
from bot.slack.lane import Lane
from bot.slack.shapes import BadShape, Inbound

log = logs.get(__name__)

INBOUND = "firebreak_inbound"  # the request's parsed shape, in Bolt's context for the listeners
DELIVERY = "firebreak_delivery"  # what the adapter received, in Bolt's context until admit parses it


@dataclass(frozen=True)
class Delivery:
    """What an adapter received, unparsed: HTTP's body text and content type, or a Socket Mode envelope."""

    text: str = ""
    content_type: str = ""
    peer: str | None = None
    size: int = 0  # the HTTP body's bytes
    envelope: SocketModeRequest | None = None

    def parse(self) -> Inbound:
        if self.envelope is not None:
            return shapes.parse_envelope(self.envelope.type, self.envelope.payload)
        return shapes.parse(self.text, self.content_type)

    def log_fields(self) -> dict[str, Any]:
        if self.envelope is not None:
            return {"mode": "socket", "envelope_type": str(self.envelope.type)[:40]}
        return {"mode": "http", "content_type": self.content_type[:80], "size": self.size, "peer": self.peer}


def inbound_of(context: dict[str, Any]) -> Inbound:
    found = context[INBOUND]
    if not isinstance(found, Inbound):
        raise TypeError(f"Bolt context {INBOUND!r} holds {type(found).__name__}")
    return found


def delivery_of(request: AsyncBoltRequest) -> Delivery | None:
    found = request.context.get(DELIVERY)
    return found if isinstance(found, Delivery) else None


def admit(req: AsyncBoltRequest) -> BoltResponse | None:
    """Parse the delivery into Bolt's request (its body and context, and INBOUND for the
    listeners); None when it was, else the answer to a bad shape (logged once here)."""
    delivery = delivery_of(req)
    try:
        if delivery is None:  # built by an adapter other than this module's: nothing to parse
            raise BadShape(400, "not_from_a_firebreak_adapter")
        inbound = delivery.parse()
    except BadShape as bad:
        fields = delivery.log_fields() if delivery is not None else {}
        log.warning("slack_request_refused", status=bad.status, reason=bad.reason, **fields)
        if delivery is not None and delivery.envelope is not None:
            return BoltResponse(status=200, body="")  # the ack, and nothing done
        return BoltResponse(status=bad.status, body={"ok": False, "error": bad.reason})
    # Bolt's own parser reads any form body containing the word "payload" as a payload (so
    # `/incident declare payload API down` would reach it empty): it gets the parsed fields.
    req.body = inbound.body
    build_async_context(req.context, inbound.body)  # what Bolt's request builder would have set
    req.context[INBOUND] = inbound
    return None


def _refused(request: web.Request, status: int, reason: str, size: int | None = None) -> web.Response:
    log.warning(
        "slack_request_refused",
        status=status,
        reason=reason,
        mode="http",
        content_type=request.content_type[:80],
        size=size,
        peer=request.remote,
    )
    return web.json_response({"ok": False, "error": reason}, status=status)


def _is_ssl_check(raw: bytes, content_type: str) -> bool:
    """Slack's `ssl_check=1` form post (no command, no payload): the only unsigned body it sends."""
    if content_type != shapes.FORM or len(raw) > 4096 or b"ssl_check=" not in raw:
        return False  # every other request is parsed once, by shapes.parse
    try:
        fields = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return False
    return fields.get("ssl_check") == ["1"] and "command" not in fields and "payload" not in fields


def handler(bolt: AsyncApp) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def slack_events(request: web.Request) -> web.Response:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _refused(request, 413, "body_too_large")
        headers: Any = request.headers  # Bolt normalizes any mapping of header names
        if _is_ssl_check(raw, request.content_type):
            # Slack's certificate probe for a slash command's URL: unsigned by design; Bolt's
            # ssl_check answers it 200 before its verification, and nothing is read or changed.
            log.info("slack_ssl_check")
            bolt_req = AsyncBoltRequest(body=raw.decode("utf-8"), query=request.query_string, headers=headers)
        elif (why := verify.refusal(request.headers, time.time())) is not None:
            return _refused(request, 401, why, len(raw))
        else:
            try:
                text = shapes.decode(raw)
            except BadShape as bad:
                return _refused(request, bad.status, bad.reason, len(raw))
            delivery = {DELIVERY: Delivery(text, request.content_type, request.remote, len(raw))}
            bolt_req = AsyncBoltRequest(body="", query=request.query_string, headers=headers, context=delivery)
            bolt_req.raw_body = text  # what Bolt verifies the signature over; admit parses it after
        resp = await bolt.async_dispatch(bolt_req)
        if resp.status == 401:  # Bolt's request verification: not signed with this app's secret
            return _refused(request, 401, "signature_mismatch", len(raw))
        return await to_aiohttp_response(resp)

    return slack_events


class SocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode adapter (slack_sdk's aiohttp client), building Bolt's request as the HTTP
    handler does: an empty body and the envelope as its Delivery, for ``admit`` to parse."""

    def __init__(self, app: AsyncApp, app_token: str, lane: Lane) -> None:
        super().__init__(app, app_token)
        self._lane = lane

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        start = time.time()
        with self._lane.acking():  # after-ack work waits to start meanwhile (bot/slack/lane.py)
            bolt_req = AsyncBoltRequest(
                mode="socket_mode", body={}, headers=build_headers(req), context={DELIVERY: Delivery(envelope=req)}
            )
            resp = await self.app.async_dispatch(bolt_req)
        if 400 <= resp.status < 500:
            # Refused and logged (Bolt's 404 for a button or form no listener has): over HTTP Slack
            # reads the status; here an envelope not acked is only delivered again, so it is acked.
            resp = BoltResponse(status=200, body="")
        await send_async_response(client, req, resp, start)
