"""Posting in the incident channel and keeping the pinned card in step with the incident."""

from __future__ import annotations

from bot import logs
from bot.chat import ChatError
from bot.core.services import Services
from bot.incidents import views
from bot.incidents.store import repo

log = logs.get(__name__)


async def refresh_card(svc: Services, inc_id: str) -> str | None:
    """Edit the card in place. Returns a warning for the user when the chat refused.

    Concurrent refreshes can reach the chat out of order, so after each edit the
    state is read again and the card re-sent if it changed meanwhile: the last
    edit to land is always followed by a check against the current state.
    """
    shown = None
    for _ in range(3):
        inc = await repo(svc).get(inc_id)
        if inc is None or not inc.channel_id or not inc.card_ts:
            return None
        if inc == shown:
            return None
        try:
            await svc.chat.update(inc.channel_id, inc.card_ts, views.card_text(inc), views.incident_card(inc))
        except ChatError as f:
            log.warning("card_update_failed", error=f.error)
            return f"(the incident card could not be updated: {f.error})"
        shown = inc
    return None


async def announce(svc: Services, inc_id: str, text: str) -> str | None:
    """Post in the incident channel; returns a warning when that failed."""
    inc = await repo(svc).get(inc_id)
    if inc is None or not inc.channel_id:
        return None
    try:
        await svc.chat.post(inc.channel_id, text)
    except ChatError as f:
        log.warning("announce_failed", error=f.error)
        return f"(could not post in the incident channel: {f.error})"
    return None


def joined(message: str, *warnings: str | None) -> str:
    return " ".join([message, *(w for w in warnings if w)])
