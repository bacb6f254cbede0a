"""Posting in an incident's channel, for every capability (the core knows the incident as a view)."""

from __future__ import annotations

from redis.exceptions import RedisError

from bot import logs
from bot.chat import ChatError
from bot.core.services import Services

log = logs.get(__name__)

STORE_LOST = "Firebreak lost its store"


async def announce(svc: Services, inc_id: str, text: str) -> str | None:
    """Post in the incident channel; returns a warning when that failed (the chat refused, or the
    store went away before the channel was looked up: the caller's change stands, and its reply
    says what is missing instead of "part of this may have happened")."""
    try:
        inc = await svc.incidents.get(inc_id)
    except RedisError:
        log.warning("announce_store_lost")
        return f"({STORE_LOST} before it posted this in the incident channel)"
    if inc is None or not inc.channel_id:
        return None
    try:
        await svc.chat.post(inc.channel_id, text)
    except ChatError as f:
        log.warning("announce_failed", error=f.error)
        return f"(could not post in the incident channel: {f.error})"
    return None


def joined(message: str, *warnings: str | None) -> str:
    """A reply with the warnings of what could not be posted or edited after it."""
    return " ".join([message, *(w for w in warnings if w)])
