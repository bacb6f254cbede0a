"""POST /alertmanager: Alertmanager's webhook (version 4), recorded, then answered.

In this order, each refusal a 4xx with one log line (never the token, never a stack trace):

1. ``Authorization: Bearer $ALERTMANAGER_TOKEN``, compared in constant time; missing, wrong, or
   no token configured: 401, and nothing is read or recorded;
2. the body, at most MAX_BODY bytes (a larger Content-Length is refused before reading): 413;
3. UTF-8 JSON, an object, ``version`` "4", and the fields Firebreak reads with their types:
   400, saying which (payload.py);
4. when it holds alerts Firebreak acts on (pages, security alerts), the body and then a scheduler
   job naming it are written to Redis, and only then is the answer 200. Opening incidents and
   posting to the chat happen in that job (jobs.py), after the answer: a slow chat never makes
   Alertmanager time out and send again, and a process that dies after answering loses nothing
   (another replica runs the job). One that dies between the two writes has not answered, so
   Alertmanager sends the delivery again; the body left behind expires.

When Redis cannot take the delivery the answer is 503, so Alertmanager sends it again.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web
from redis.exceptions import RedisError

from bot import logs
from bot.core.services import Services
from bot.signals.jobs import DELIVERY
from bot.signals.payload import Refused, parse
from bot.signals.store import store

log = logs.get(__name__)

MAX_BODY = 5 * 1024 * 1024
_CHUNK = 256 * 1024


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def authorized(header: str | None, token: str | None) -> bool:
    """``Bearer <token>`` (the scheme in any case), compared in constant time."""
    if not token or not header:
        return False
    scheme, _, given = header.strip().partition(" ")
    # Digests of equal length: the comparison takes the same time whatever was sent.
    same = hmac.compare_digest(_digest(given.strip()), _digest(token))
    return scheme.lower() == "bearer" and same


async def _text(request: web.Request) -> str:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise Refused(413, f"body_too_large: at most {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > MAX_BODY:
            raise Refused(413, f"body_too_large: at most {MAX_BODY} bytes")
        chunks.append(chunk)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "malformed_json: the body is not UTF-8 JSON") from None


def _refused(request: web.Request, status: int, reason: str) -> web.Response:
    log.warning(
        "alertmanager_request_refused",
        status=status,
        reason=reason,
        size=request.content_length,
        peer=request.remote,
    )
    return web.json_response({"ok": False, "error": reason}, status=status)


async def receive(svc: Services, request: web.Request) -> web.Response:
    token = svc.settings.alertmanager_token
    if not authorized(request.headers.get("Authorization"), token.get_secret_value() if token else None):
        return _refused(request, 401, "unauthorized" if token else "unauthorized: ALERTMANAGER_TOKEN is not set")
    try:
        text = await _text(request)
        payload = parse(text)
    except Refused as r:
        return _refused(request, r.status, r.reason)
    received_at, delivery = svc.clock.now(), uuid.uuid4().hex[:16]
    firing = sum(1 for a in payload.handled if a["status"] == "firing")
    fields = {"alerts": payload.alerts, "handled": len(payload.handled), "firing": firing}
    if payload.handled:
        try:
            await store(svc).save_delivery(delivery, text)
            await svc.scheduler.schedule(DELIVERY, delivery, received_at, {"id": delivery, "received_at": received_at})
        except RedisError:
            log.warning("alertmanager_not_recorded", delivery=delivery, **fields)
            return web.json_response(
                {"ok": False, "error": "store_unreachable: nothing was recorded; send it again"}, status=503
            )
    log.info("alertmanager_delivery", delivery=delivery, group_key=payload.group_key, **fields)
    return web.json_response(
        {"ok": True, "delivery": delivery, "alerts": payload.alerts, "handled": len(payload.handled)}
    )


def make(svc: Services) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return await receive(svc, request)

    return handler
