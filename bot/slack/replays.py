"""After the ack: was this delivery received before?

Over HTTP, the delivery is the signed request (timestamp and bytes): one sent again byte for
byte while its signature is still valid does nothing the second time. Slack's own HTTP retries
are signed anew (a later timestamp), so they are not replays here; the event's own dedupe
(bot/comms/watch.py) decides for those. Over Socket Mode nothing is signed and there is no
raw body, and an envelope Slack delivers again comes under a new envelope id, so the key is
what Slack keeps the same in the payload: a command's or an interaction's ``trigger_id`` (one
per invocation), and an event's ``event_id`` with its ``retry_attempt`` (Slack's retry of an
event is a new delivery, as over HTTP, for the event's own dedupe to decide; the same attempt
twice, as over two connections during a refresh, is the replay). The envelope id is the key
only for a payload with neither (a modal closed, an options load).

The check runs in the after-ack work, never before the ack: Slack's 3 s budget is not spent
on a Redis round trip, and a replay is simply acknowledged again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.socket_mode.request import SocketModeRequest

from bot import logs
from bot.slack import verify
from bot.slack.inbound import delivery_of
from bot.slack.shapes import Kind
from bot.slack.store import Received
from bot.store import Redis

log = logs.get(__name__)

# A replay is accepted while its timestamp is within the window either side of now, so
# one seen now can come back for up to twice the window.
REPLAY_TTL_S = 2 * verify.WINDOW_S
REPLAY_CHECK_S = 1.0  # a stalled store must not hold a lane worker
ALREADY = "Already received; nothing done twice."

Job = Callable[[], Awaitable[None]]


def socket_key(envelope: SocketModeRequest) -> str:
    """What Slack keeps the same when it delivers this envelope again (the module's docstring)."""
    payload = envelope.payload
    if envelope.type == "events_api" and isinstance(event_id := payload.get("event_id"), str):
        return f"event:{event_id}:{envelope.retry_attempt or 0}"
    if isinstance(trigger_id := payload.get("trigger_id"), str):
        return f"{envelope.type}:{trigger_id}"
    return f"envelope:{envelope.envelope_id}"


def digest(request: AsyncBoltRequest) -> str:
    delivery = delivery_of(request)
    if delivery is not None and delivery.envelope is not None:
        return hashlib.sha256(socket_key(delivery.envelope).encode()).hexdigest()
    stamp = request.headers.get(verify.TIMESTAMP.lower(), [""])[0]
    return hashlib.sha256(f"{stamp}:".encode() + request.raw_body.encode()).hexdigest()


class Replays:
    def __init__(self, redis: Redis) -> None:
        self._received = Received(redis)

    async def first(self, request: AsyncBoltRequest, kind: Kind) -> bool:
        """True unless this delivery was received before. When the store cannot say, the
        request goes on: every effect it could have needs the same store, so the executor
        answers that the store is unreachable (and nothing changes)."""
        key = digest(request)
        try:
            async with asyncio.timeout(REPLAY_CHECK_S):
                if await self._received.first(key, REPLAY_TTL_S):
                    return True
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("replay_check_unavailable", kind=kind.value, error=type(exc).__name__)
            return True
        retry = request.headers.get("x-slack-retry-num", [""])[0][:4] or None
        log.info("slack_request_replayed", kind=kind.value, digest=key[:16], retry=retry)
        return False

    def once(self, request: AsyncBoltRequest, kind: Kind, job: Job, replayed: Job | None = None) -> Job:
        """``job`` for the lane, run only for the first delivery (``replayed`` for the others)."""

        async def guarded() -> None:
            if await self.first(request, kind):
                await job()
            elif replayed is not None:
                await replayed()

        return guarded
