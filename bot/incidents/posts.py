"""Keeping the pinned card in step with the incident; posting in its channel is bot.core.posts."""

from __future__ import annotations

from redis.exceptions import RedisError

from bot import logs
from bot.chat import ChatError
from bot.core.posts import STORE_LOST, announce, joined
from bot.core.services import Services
from bot.incidents import views
from bot.incidents.store import repo

log = logs.get(__name__)


async def refresh_card(svc: Services, inc_id: str) -> str | None:
    """Edit the card in place. Returns a warning for the user when the chat refused, or when the
    store went away (the caller's change stands; its reply says the card is behind).

    Concurrent refreshes can reach the chat out of order, so after each edit the
    state is read again and the card re-sent if it changed meanwhile: the last
    edit to land is always followed by a check against the current state.
    """
    shown = None
    for _ in range(3):
        try:
            inc = await repo(svc).get(inc_id)
        except RedisError:
            log.warning("card_update_store_lost")
            return f"({STORE_LOST} before it updated the incident card)"
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


__all__ = ["announce", "joined", "refresh_card"]
