"""Posting a side effect once (a reminder, an escalation, a nudge, a flagged event)."""

from __future__ import annotations

from bot import logs
from bot.comms.store import MarkClaim, MarkDone, pending, store
from bot.core.services import Services

log = logs.get(__name__)

KEEP_S = 14 * 86400  # how long a done mark outlives its due (redeliveries come far sooner)


class Once:
    """A two-step dedupe mark (lua.MARK_CLAIM): claim, post, then done or release.

    The claim holds for a little less than the scheduler's lease, so when a claimer dies
    mid-post the job the scheduler hands out again finds the claim expired and posts.
    """

    def __init__(self, svc: Services, key: str) -> None:
        self.svc, self.key, self._value = svc, key, ""

    async def claim(self) -> bool:
        svc = self.svc
        until = svc.clock.now() + svc.scheduler.lease * 0.9
        self._value = pending(until)
        got = await store(svc).claim_mark(self.key, svc.clock.now(), until, KEEP_S)
        return got is MarkClaim.CLAIMED

    async def done(self) -> bool:
        """Mark done if the claim is still ours (False: it ran out and another process took it)."""
        ok = await store(self.svc).done_mark(self.key, self._value, KEEP_S) is MarkDone.DONE
        if not ok:
            log.warning("mark_claim_lost", mark=self.key)
        return ok

    async def release(self) -> None:
        await store(self.svc).release_mark(self.key, self._value)
