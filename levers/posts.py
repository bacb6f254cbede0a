"""Posting a lever's outcome in its incident's channel (the levers know the incident only as a view)."""

from __future__ import annotations

from bot import logs
from bot.chat import ChatError
from bot.core.services import Services

log = logs.get(__name__)


async def announce(svc: Services, inc_id: str, text: str) -> str | None:
    """Post in the incident channel; returns a warning when that failed."""
    inc = await svc.incidents.get(inc_id)
    if inc is None or not inc.channel_id:
        return None
    try:
        await svc.chat.post(inc.channel_id, text)
    except ChatError as f:
        log.warning("announce_failed", error=f.error)
        return f"(could not post in the incident channel: {f.error})"
    return None
