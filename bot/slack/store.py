"""The Slack surface's one piece of state: which deliveries (signed requests, Socket Mode envelopes) were received."""

from __future__ import annotations

from bot.store import Keys, Redis, write


class Received:
    """Deliveries seen in the last ``ttl`` seconds, by digest (bot/slack/replays.py).

    Written without bot.store's deadline: a mark that lands after its caller stopped waiting
    only records a delivery that was let through anyway (the check fails open)."""

    def __init__(self, redis: Redis) -> None:
        self._r = redis

    async def first(self, digest: str, ttl: int) -> bool:
        """Record ``digest``; True only for the first caller (atomic SET NX EX)."""
        [reply] = await write(self._r, ("SET", Keys.inbound(digest), "1", "NX", "EX", ttl), deadline=False)
        return reply is not None
