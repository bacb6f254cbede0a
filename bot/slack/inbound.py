"""POST /slack/events: parse the request, then Bolt.

In this order, each answering a bad request with a 4xx and one log line:

1. the body is read (over aiohttp's ``client_max_size``: 413); Slack's unsigned
   ``ssl_check=1`` probe goes straight to Bolt, whose ssl_check answers it 200;
2. the signature headers' shape and freshness (bot/slack/verify.py: 401), so
   Bolt's verifier can read them without raising;
3. the body's shape (bot/slack/shapes.py: 400, or 415 for a content type Slack
   does not send), so Bolt can build its request without raising;
4. Bolt: its request verification is the one signature check (a 401 from it is
   logged here as ``signature_mismatch``), its url_verification answers the
   challenge, and its listeners route by command, action id, callback id and
   event type (bot/slack/app.py).

No I/O happens before the ack: replays are caught after it (bot/slack/replays.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot import logs
from bot.slack import shapes, verify
from bot.slack.shapes import BadShape, Inbound, Kind

log = logs.get(__name__)

INBOUND = "firebreak_inbound"  # the request's parsed shape, in Bolt's context for the listeners


def inbound_of(context: dict[str, Any]) -> Inbound:
    found = context[INBOUND]
    if not isinstance(found, Inbound):
        raise TypeError(f"Bolt context {INBOUND!r} holds {type(found).__name__}")
    return found


def _refused(request: web.Request, status: int, reason: str, size: int | None = None) -> web.Response:
    log.warning(
        "slack_request_refused",
        status=status,
        reason=reason,
        content_type=request.content_type[:80],
        size=size,
        peer=request.remote,
    )
    return web.json_response({"ok": False, "error": reason}, status=status)


def to_bolt_request(request: web.Request, inbound: Inbound | None, text: str) -> AsyncBoltRequest:
    context = {INBOUND: inbound} if inbound is not None else None
    try:
        req = AsyncBoltRequest(body=text, query=request.query_string, headers=request.headers, context=context)  # type: ignore[arg-type]
    except (LookupError, TypeError, AttributeError, ValueError):
        # shapes.py checks every field Bolt's request builder reads; this is the backstop.
        raise BadShape(400, "not_a_shape_bolt_reads") from None
    if inbound is not None and inbound.kind is Kind.command and req.body != inbound.body:
        # Bolt's parser reads any form body containing the word "payload" as a payload, so
        # `/incident declare payload API down` would reach it empty: it gets the parsed fields.
        req.body = inbound.body
    return req


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
        inbound: Inbound | None = None
        try:
            if _is_ssl_check(raw, request.content_type):
                # Slack's certificate probe for a slash command's URL: unsigned by design; Bolt's
                # ssl_check answers it 200 before its verification, and nothing is read or changed.
                log.info("slack_ssl_check")
                text = raw.decode("utf-8")
            elif (why := verify.refusal(request.headers, time.time())) is not None:
                return _refused(request, 401, why, len(raw))
            else:
                inbound = shapes.parse(raw, request.content_type)
                text = inbound.text
            bolt_req = to_bolt_request(request, inbound, text)
        except BadShape as bad:
            return _refused(request, bad.status, bad.reason, len(raw))
        resp = await bolt.async_dispatch(bolt_req)
        if resp.status == 401:  # Bolt's request verification: not signed with this app's secret
            return _refused(request, 401, "signature_mismatch", len(raw))
        return await to_aiohttp_response(resp)

    return slack_events
