"""The scheduler: upsert/cancel timed jobs, claim due ones atomically, run handlers.

Every replica runs the same loop against one Redis; a due job is claimed by
exactly one of them (Lua). Jobs live only in Redis, so a restart loses
nothing: whatever fell due while every replica was down is delivered at
start, marked ``late``.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from bot import logs
from bot.clock import Clock
from bot.scheduler import scripts
from bot.scheduler.jobs import HANDLERS, STARTUP, Job
from bot.store import Keys, Redis

if TYPE_CHECKING:
    from bot.core.services import Services

log = logs.get(__name__)


def _member(kind: str, key: str) -> str:
    if "|" in kind:
        raise ValueError(f"job kind may not contain '|': {kind!r}")
    return f"{kind}|{key}"


class Scheduler:
    def __init__(
        self, redis: Redis, clock: Clock, *, tolerance: float = 2.0, lease: float = 60.0, batch: int = 200,
        concurrency: int = 32, max_attempts: int = 3,
    ) -> None:
        self.r = redis
        self.clock = clock
        self.tolerance = tolerance  # later than due + this counts as late
        self.lease = lease  # a claimer that has not acked by then is presumed dead
        self.batch = batch
        self.max_attempts = max_attempts
        self._sem = asyncio.Semaphore(concurrency)
        self._keys = [Keys.sched("due"), Keys.sched("jobs")]
        self._claim_keys = [*self._keys, Keys.sched("lease"), Keys.sched("inflight"), Keys.sched("dead")]
        self._schedule = redis.register_script(scripts.SCHEDULE)
        self._cancel = redis.register_script(scripts.CANCEL)
        self._claim = redis.register_script(scripts.CLAIM)
        self._ack = redis.register_script(scripts.ACK)

    async def schedule(self, kind: str, key: str, due: float, payload: dict[str, Any]) -> None:
        """At most one pending job per (kind, key): scheduling again moves it."""
        # Numbers and payload travel as strings: Lua's cjson would round a float due.
        doc = {"kind": kind, "key": key, "due": repr(float(due)), "payload": json.dumps(payload),
               "token": uuid.uuid4().hex}
        await self._schedule(keys=self._keys, args=[_member(kind, key), repr(float(due)), json.dumps(doc)])

    async def cancel(self, kind: str, key: str) -> None:
        await self._cancel(keys=self._keys, args=[_member(kind, key)])

    async def pending(self, kind: str, key: str) -> float | None:
        """The due time of the pending job, if any (status lines, tests)."""
        score = await self.r.zscore(Keys.sched("due"), _member(kind, key))
        return float(score) if score is not None else None

    async def claim(self) -> list[Job]:
        now = self.clock.now()
        raw = await self._claim(
            keys=self._claim_keys, args=[repr(now), repr(now + self.lease), self.batch, self.max_attempts]
        )
        jobs = []
        for item in raw:
            d = json.loads(item)
            due = float(d["due"])
            jobs.append(Job(kind=d["kind"], key=d["key"], due=due, payload=json.loads(d["payload"]),
                            late=now > due + self.tolerance, attempt=int(d.get("attempt", 1)), token=d["token"]))
        return jobs

    async def ack(self, job: Job) -> None:
        await self._ack(keys=[Keys.sched("lease"), Keys.sched("inflight")], args=[job.token])

    async def _run_one(self, svc: "Services", job: Job) -> None:
        handler = HANDLERS.get(job.kind)
        async with self._sem:
            if handler is None:
                log.warning("job_kind_unknown", kind=job.kind, key=job.key)
            else:
                try:
                    await handler(svc, job)
                except Exception:  # noqa: BLE001 - left leased: redelivered when the lease runs out
                    log.exception("job_failed", kind=job.kind, key=job.key, attempt=job.attempt)
                    return
            await self.ack(job)

    async def tick(self, svc: "Services") -> int:
        """Claim and run everything due at the clock's now. Returns how many jobs ran."""
        total = 0
        while True:
            jobs = await self.claim()
            if not jobs:
                return total
            await asyncio.gather(*(self._run_one(svc, j) for j in jobs))
            total += len(jobs)
            if len(jobs) < self.batch:
                return total

    async def next_due(self) -> float | None:
        head = await self.r.zrange(Keys.sched("due"), 0, 0, withscores=True)
        return float(head[0][1]) if head else None

    async def run(self, svc: "Services", poll: float | None = None) -> None:
        """The loop each replica runs: tick, then sleep until the next due (at most ``poll``)."""
        poll = poll or svc.settings.firebreak_scheduler_tick
        # Start hooks run beside the loop so a long repair never delays a due job.
        hooks = asyncio.create_task(self._start_hooks(svc))
        log.info("scheduler_running", poll=poll)
        try:
            await self._loop(svc, poll)
        finally:
            hooks.cancel()

    async def _start_hooks(self, svc: "Services") -> None:
        for start in STARTUP:
            try:
                await start(svc)
            except Exception:  # noqa: BLE001 - a failed start hook must not stop the loop
                log.exception("scheduler_start_hook_failed", hook=getattr(start, "__name__", "?"))

    async def _loop(self, svc: "Services", poll: float) -> None:
        while True:
            try:
                await self.tick(svc)
                nxt = await self.next_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - Redis blips: keep the loop alive and try again
                log.exception("scheduler_tick_failed")
                nxt = None
            wait = poll if nxt is None else min(poll, max(0.0, nxt - self.clock.now()))
            await asyncio.sleep(wait)
