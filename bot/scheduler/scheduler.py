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
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import structlog

from bot import logs
from bot.audit import AuditLog
from bot.clock import Clock
from bot.ids import INCIDENT_ID, SYSTEM_ACTOR
from bot.scheduler import lua
from bot.scheduler.jobs import Job, RunJob, StartHook
from bot.store import Keys, Redis, script

log = logs.get(__name__)


class Claimed(NamedTuple):
    jobs: list[Job]  # to run now
    dead: list[Job]  # given up on: every attempt's claimer failed or died


def _job(raw: str, now: float, tolerance: float) -> Job:
    d = json.loads(raw)
    due = float(d["due"])
    return Job(
        kind=d["kind"],
        key=d["key"],
        due=due,
        payload=json.loads(d["payload"]),
        late=now > due + tolerance,
        attempt=int(d.get("attempt", 1)),
        token=d["token"],
    )


def incident_of(job: Job) -> str | None:
    """The incident a job belongs to, for its logs and audit: the payload's, else a key that
    starts with an incident id (comms jobs are keyed "INC-n" or "INC-n/HO-m")."""
    inc = job.payload.get("incident") or job.key.split("/", 1)[0]
    return inc if isinstance(inc, str) and INCIDENT_ID.match(inc) else None


def _member(kind: str, key: str) -> str:
    if "|" in kind:
        raise ValueError(f"job kind may not contain '|': {kind!r}")
    return f"{kind}|{key}"


class Scheduler:
    def __init__(
        self,
        redis: Redis,
        clock: Clock,
        *,
        audit: AuditLog | None = None,
        tolerance: float = 2.0,
        lease: float = 60.0,
        batch: int = 200,
        concurrency: int = 32,
        max_attempts: int = 3,
        hook_retry_s: float = 1.0,
        hook_retry_max_s: float = 60.0,
        poll: float = 0.5,
    ) -> None:
        self.r = redis
        self.clock = clock
        self.audit = audit
        self.poll = poll  # the longest sleep between ticks
        self.handlers: Mapping[str, RunJob] = {}
        self.startup: Sequence[StartHook] = ()
        self.tolerance = tolerance  # later than due + this counts as late
        self.lease = lease  # a claimer that has not acked by then is presumed dead
        self.batch = batch
        self.max_attempts = max_attempts
        self.hook_retry_s, self.hook_retry_max_s = hook_retry_s, hook_retry_max_s  # start hook backoff
        self._sem = asyncio.Semaphore(concurrency)
        self._keys = [Keys.sched("due"), Keys.sched("jobs")]
        self._claim_keys = [*self._keys, Keys.sched("lease"), Keys.sched("inflight"), Keys.sched("dead")]
        self._schedule = script(redis, lua.SCHEDULE)
        self._cancel = script(redis, lua.CANCEL)
        self._claim = script(redis, lua.CLAIM)
        self._ack = script(redis, lua.ACK, deadline=False)  # the job ran

    def bind(self, handlers: Mapping[str, RunJob], startup: Sequence[StartHook]) -> None:
        """The app's job handlers and start hooks (bot/runtime.py binds them to its services)."""
        self.handlers, self.startup = handlers, startup

    async def schedule(self, kind: str, key: str, due: float, payload: dict[str, Any]) -> None:
        """At most one pending job per (kind, key): scheduling again moves it."""
        # Numbers and payload travel as strings: Lua's cjson would round a float due.
        doc = {
            "kind": kind,
            "key": key,
            "due": repr(float(due)),
            "payload": json.dumps(payload),
            "token": uuid.uuid4().hex,
        }
        await self._schedule(keys=self._keys, args=[_member(kind, key), repr(float(due)), json.dumps(doc)])

    async def cancel(self, kind: str, key: str) -> None:
        await self._cancel(keys=self._keys, args=[_member(kind, key)])

    async def pending(self, kind: str, key: str) -> float | None:
        """The due time of the pending job, if any (status lines, tests)."""
        score = await self.r.zscore(Keys.sched("due"), _member(kind, key))
        return float(score) if score is not None else None

    async def claim(self) -> Claimed:
        now = self.clock.now()
        claimed, dead = await self._claim(
            keys=self._claim_keys, args=[repr(now), repr(now + self.lease), self.batch, self.max_attempts]
        )
        return Claimed([_job(r, now, self.tolerance) for r in claimed], [_job(r, now, self.tolerance) for r in dead])

    async def ack(self, job: Job) -> None:
        await self._ack(keys=[Keys.sched("lease"), Keys.sched("inflight")], args=[job.token])

    async def _run_one(self, job: Job) -> None:
        handler = self.handlers.get(job.kind)
        async with self._sem:
            with structlog.contextvars.bound_contextvars(job=job.kind, job_key=job.key, incident=incident_of(job)):
                if handler is None:
                    log.warning("job_kind_unknown")
                else:
                    try:
                        await handler(job)
                    except Exception:
                        log.exception("job_failed", attempt=job.attempt)
                        return
                await self.ack(job)

    async def _dead(self, job: Job) -> None:
        """A job given up on is said out loud: an error log and an audit entry."""
        inc, attempts = incident_of(job), job.attempt - 1
        log.error("job_dead", job=job.kind, job_key=job.key, incident=inc, attempts=attempts)
        if self.audit is None:
            return
        try:
            await self.audit.append(
                "scheduler.job_dead",
                actor=SYSTEM_ACTOR,
                incident=inc,
                detail={"kind": job.kind, "key": job.key, "due": job.due, "attempts": attempts},
            )
        except Exception:
            log.exception("job_dead_audit_failed", job=job.kind, job_key=job.key)

    async def tick(self) -> int:
        """Claim and run everything due at the clock's now. Returns how many jobs ran."""
        total = 0
        while True:
            jobs, dead = await self.claim()
            for job in dead:
                await self._dead(job)
            if not jobs:
                return total
            await asyncio.gather(*(self._run_one(j) for j in jobs))
            total += len(jobs)
            if len(jobs) < self.batch:
                return total

    async def next_due(self) -> float | None:
        head = await self.r.zrange(Keys.sched("due"), 0, 0, withscores=True)
        return float(head[0][1]) if head else None

    async def run(self) -> None:
        """The loop each replica runs: tick, then sleep until the next due (at most ``poll``)."""
        # Start hooks run beside the loop so a long repair never delays a due job.
        hooks = asyncio.create_task(self._start_hooks())
        log.info("scheduler_running", poll=self.poll)
        try:
            await self._loop(self.poll)
        finally:
            hooks.cancel()

    async def _start_hooks(self) -> None:
        # Side by side: the hooks are independent repairs, and one still retrying holds up no other.
        await asyncio.gather(*(self._start_hook(start) for start in self.startup))

    async def _start_hook(self, start: StartHook) -> None:
        """Run one start hook until it succeeds (e.g. Redis was not up yet), backing off."""
        delay = self.hook_retry_s
        while True:
            try:
                await start()
                return
            except Exception:
                log.exception("scheduler_start_hook_failed", hook=getattr(start, "__name__", "?"), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.hook_retry_max_s)

    async def _loop(self, poll: float) -> None:
        while True:
            try:
                await self.tick()
                nxt = await self.next_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduler_tick_failed")
                nxt = None
            wait = poll if nxt is None else min(poll, max(0.0, nxt - self.clock.now()))
            await asyncio.sleep(wait)
