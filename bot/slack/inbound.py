"""POST /slack/events: signature, shape and replay checks, then Bolt.

In this order, each answering a bad request with a 4xx and one log line:

1. the body is read (over aiohttp's ``client_max_size``: 413); Slack's unsigned
   ``ssl_check=1`` probe is answered 200 here, touching nothing;
2. Slack's signature over the raw bytes and a timestamp within five minutes
   (bot/slack/verify.py: 401), before anything parses the body;
3. the body's shape (bot/slack/shapes.py: 400, or 415 for a content type Slack
   does not send); event types Firebreak does not listen to get a 200;
4. replays: a request whose timestamp and bytes were already received is
   answered 200 and does nothing (Slack's own retries are signed anew, so
   they get through and are deduplicated by event id where it matters);
5. Bolt, given the parsed body (it never parses the body itself: its parser
   treats any form body containing the word "payload" as a payload).

Bolt's own signature check stays on: it repeats ours on a body already known to
be well formed, and keeps the Bolt app safe wherever it is mounted.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from aiohttp import web
from redis.exceptions import RedisError
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest

from bot import logs
from bot.core.services import Services
from bot.slack import shapes, verify
from bot.slack.shapes import BadShape, Inbound, Kind
from bot.slack.store import Received

log = logs.get(__name__)

# A replay is accepted while its timestamp is within the window either side of now, so
# one seen now can come back for up to twice the window.
REPLAY_TTL_S = 2 * verify.WINDOW_S
# The replay check must not eat Slack's 3-second ack budget when Redis stalls.
REPLAY_CHECK_S = 1.0
ALREADY = "Already received; nothing done twice."


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


def to_bolt_request(request: web.Request, inbound: Inbound) -> AsyncBoltRequest:
    # Built empty, then filled with the checked body: Bolt's own parse would run again.
    req = AsyncBoltRequest(body="", query=request.query_string, headers=request.headers)  # type: ignore[arg-type]
    req.raw_body = inbound.text
    req.body = inbound.body
    try:
        req.context = build_async_context(AsyncBoltContext({}), req.body)
    except (LookupError, TypeError, AttributeError, ValueError):
        # shapes.py checks every field Bolt's context builder reads; this is the backstop.
        raise BadShape(400, "not_a_shape_bolt_reads") from None
    return req


async def _first_delivery(received: Received, digest: str, kind: Kind) -> bool:
    """True unless this exact request was received before. When the store cannot say, the
    request goes on: every effect it could have needs the same store, so the executor
    answers that the store is unreachable (and nothing changes)."""
    try:
        async with asyncio.timeout(REPLAY_CHECK_S):
            return await received.first(digest, REPLAY_TTL_S)
    except (RedisError, OSError, TimeoutError) as exc:
        log.warning("replay_check_unavailable", kind=kind.value, error=type(exc).__name__)
        return True


def _is_ssl_check(raw: bytes, content_type: str) -> bool:
    """Slack's `ssl_check=1` form post (no command, no payload): the only unsigned body it sends."""
    if content_type != "application/x-www-form-urlencoded" or len(raw) > 4096:
        return False
    fields = parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True)
    return fields.get("ssl_check") == ["1"] and "command" not in fields and "payload" not in fields


def _already(inbound: Inbound) -> web.Response:
    if inbound.kind is Kind.command:  # the ack is shown to the person who typed it
        return web.json_response({"response_type": "ephemeral", "text": ALREADY})
    return web.Response(status=200)  # buttons, forms (closes the form) and events: nothing to show


def handler(svc: Services, bolt: AsyncApp) -> Callable[[web.Request], Awaitable[web.Response]]:
    assert svc.settings.slack_signing_secret is not None  # build_runtime requires Slack settings
    secret = svc.settings.slack_signing_secret.get_secret_value()
    received = Received(svc.redis)

    async def slack_events(request: web.Request) -> web.Response:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _refused(request, 413, "body_too_large")
        if _is_ssl_check(raw, request.content_type):
            # Slack's certificate probe for a slash command's URL: unsigned by design, answered
            # 200 as Bolt does, and nothing is read or changed.
            log.info("slack_ssl_check")
            return web.Response(status=200)
        if (why := verify.refusal(secret, raw, request.headers, time.time())) is not None:
            return _refused(request, 401, why, len(raw))
        try:
            inbound = shapes.parse(raw, request.content_type)
            bolt_req = to_bolt_request(request, inbound)
        except BadShape as bad:
            return _refused(request, bad.status, bad.reason, len(raw))
        if inbound.kind is Kind.ignored:
            event = inbound.body.get("event") or {}
            kind, event_type = str(inbound.body.get("type"))[:40], str(event.get("type"))[:40]
            log.info("slack_request_ignored", type=kind, event_type=event_type)
            return web.Response(status=200)
        digest = None
        if inbound.kind is not Kind.url_verification:  # answers a challenge, changes nothing
            stamp = request.headers[verify.TIMESTAMP].encode()
            digest = hashlib.sha256(stamp + b":" + raw).hexdigest()
            if not await _first_delivery(received, digest, inbound.kind):
                retry = request.headers.get("X-Slack-Retry-Num", "")[:4] or None
                log.info("slack_request_replayed", kind=inbound.kind.value, digest=digest[:16], retry=retry)
                return _already(inbound)
        resp = await bolt.async_dispatch(bolt_req)
        if resp.status >= 500 and digest is not None:
            # Not handled (a listener failed before its ack): a retry of these bytes may run.
            try:
                await received.forget(digest)
            except (RedisError, OSError):
                log.warning("replay_mark_not_cleared", kind=inbound.kind.value)
        return await to_aiohttp_response(resp)

    return slack_events
