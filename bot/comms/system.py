"""Running a timer's work as a system request, and posting a side effect once."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot import logs
from bot.comms.scripts import loaded
from bot.core import dispatch
from bot.core.request import Command, Request, Source

if TYPE_CHECKING:
    from bot.core.services import Services

log = logs.get(__name__)

KEEP_S = 14 * 86400  # how long a done mark outlives its due (redeliveries come far sooner)


class JobRetry(Exception):
    """Leave the job leased so the scheduler delivers it again (e.g. Slack was unreachable)."""


async def run_system(svc: "Services", cmd: Command, inc_id: str) -> None:
    out = await dispatch.execute(svc, Request(command=cmd, actor="system", source=Source.scheduler,
                                              incident_id=inc_id))
    if out.result == "error":
        raise JobRetry(out.message)


class Once:
    """A two-step dedupe mark (scripts.MARK_CLAIM): claim, post, then done or release.

    The claim holds for a little less than the scheduler's lease, so when a claimer dies
    mid-post the job the scheduler hands out again finds the claim expired and posts.
    """

    def __init__(self, svc: "Services", key: str) -> None:
        self.svc, self.key, self._value = svc, key, ""

    async def claim(self) -> bool:
        svc = self.svc
        until = svc.clock.now() + svc.scheduler.lease * 0.9
        self._value = f"pending:{until!r}"
        ok = await loaded(svc).mark_claim(keys=[self.key], args=[repr(svc.clock.now()), repr(until), KEEP_S])
        return bool(ok)

    async def done(self) -> bool:
        """Mark done if the claim is still ours (False: it ran out and another process took it)."""
        ok = bool(await loaded(self.svc).mark_done(keys=[self.key], args=[self._value, KEEP_S]))
        if not ok:
            log.warning("mark_claim_lost", mark=self.key)
        return ok

    async def release(self) -> None:
        await loaded(self.svc).mark_release(keys=[self.key], args=[self._value])


async def is_done(svc: "Services", key: str) -> bool:
    v = await svc.redis.get(key)
    return v is not None and not v.startswith("pending:")
