"""Posting a side effect once (a reminder, an escalation, a nudge, a flagged event)."""

from __future__ import annotations

from bot import logs
from bot.chat import ChatError
from bot.comms.store import MarkClaim, MarkDone, pending, store
from bot.core.services import Services

log = logs.get(__name__)

KEEP_S = 14 * 86400  # how long a done mark outlives its due (redeliveries come far sooner)
CLAIM_OF_LEASE = 0.9  # a claim holds this share of the scheduler's lease
CLOCK_SKEW_S = 60.0  # our clock against the chat's message times: look back this much further


class Once:
    """A two-step dedupe mark (lua.MARK_CLAIM): claim, post, then done or release.

    The claim holds for a little less than the scheduler's lease, so when a claimer dies
    mid-post the job the scheduler hands out again finds the claim expired and posts. A
    claimer can also die after its post landed and before the mark said so: a post made
    with ``mark=key`` carries the key, and whoever takes over an expired claim asks the
    channel's history for it first (``landed_before``), so the post is not made twice.
    """

    def __init__(self, svc: Services, key: str) -> None:
        self.svc, self.key, self._value = svc, key, ""
        self._expired_until: float | None = None

    async def claim(self) -> bool:
        svc = self.svc
        until = svc.clock.now() + svc.scheduler.lease * CLAIM_OF_LEASE
        self._value = pending(until)
        got = await store(svc).claim_mark(self.key, svc.clock.now(), until, KEEP_S)
        self._expired_until = got.expired_until if got.code is MarkClaim.TAKEN_OVER else None
        return got.code is not MarkClaim.TAKEN

    async def landed_before(self, channel: str) -> bool:
        """After taking over a dead claimer's mark: is its post (made with ``mark=key``) in the
        channel already, so only the mark was missing? Looks since that claimer claimed."""
        if self._expired_until is None:
            return False
        since = self._expired_until - self.svc.scheduler.lease * CLAIM_OF_LEASE - CLOCK_SKEW_S
        try:
            found = await self.svc.chat.posted(channel, self.key, since)
        except ChatError as f:
            # Can't tell: post. A reminder said twice is better than one never said.
            log.warning("mark_history_unreadable", mark=self.key, error=f.error)
            return False
        if found:
            log.info("mark_post_found", mark=self.key)
        return found

    async def done(self) -> bool:
        """Mark done if the claim is still ours (False: it ran out and another process took it)."""
        ok = await store(self.svc).done_mark(self.key, self._value, KEEP_S) is MarkDone.DONE
        if not ok:
            log.warning("mark_claim_lost", mark=self.key)
        return ok

    async def release(self) -> None:
        await store(self.svc).release_mark(self.key, self._value)


async def post_once(svc: Services, channel: str, mark: str, text: str) -> str | None:
    """Post ``text`` in ``channel`` once per ``mark`` (a retried job finds it done, another
    replica's claim skips it); the chat's error when the post failed (the claim is released, so
    the next try posts)."""
    once = Once(svc, mark)
    if not await once.claim():
        return None  # posted already, or another replica is posting it
    if await once.landed_before(channel):
        await once.done()
        return None
    try:
        await svc.chat.post(channel, text, mark=mark)
    except ChatError as f:
        await once.release()
        return f.error
    await once.done()
    return None
