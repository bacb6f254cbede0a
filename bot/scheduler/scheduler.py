"""The scheduler: upsert/cancel timed jobs, claim due ones atomically, run handlers.

Every replica runs the same loop against one Redis; a due job is claimed by
exactly one of them (Lua). Jobs live only in Redis, so a restart loses
nothing: whatever fell due while every replica was down is delivered at
start, marked ``late``. A replica shutting down (``stop``) claims nothing more
and hands back at once the jobs it claimed but had not started, so another
replica runs them at its next tick rather than after the lease; the running
ones finish within its grace. One it has to cut short is left to its lease,
exactly like a claimer that died: the handlers' own guards (a reminder's
posted-mark, a lever's in-flight timer) are timed to that redelivery.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import structlog

from bot import logs, metrics
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
    return inc if isinstance(inc, str) and INCIDENT_ID.fullmatch(inc) else None


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
        due, jobs, leased, inflight = (
            Keys.sched("due"),
            Keys.sched("jobs"),
            Keys.sched("lease"),
            Keys.sched("inflight"),
        )
        self._members = Keys.sched("members")  # lua.py: the pending members, for counts by kind
        self._keys = [due, jobs, self._members]
        self._claim_keys = [due, jobs, leased, inflight, Keys.sched("dead"), self._members]
        self._release_keys = [due, jobs, leased, inflight, self._members]
        self._schedule = script(redis, lua.SCHEDULE)
        self._cancel = script(redis, lua.CANCEL)
        self._claim = script(redis, lua.CLAIM)
        self._ack = script(redis, lua.ACK, deadline=False)  # the job ran
        self._release = script(redis, lua.RELEASE)
        self._stopping = asyncio.Event()
        self._waiting: dict[str, Job] = {}  # claimed by this process, not started yet (token -> job)
        self._loop_task: asyncio.Task[None] | None = None

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

    async def pending_count(self, kind: str) -> int:
        """How many jobs of ``kind`` are pending (scheduled, not claimed): one ZLEXCOUNT."""
        _member(kind, "")
        # Members are "kind|key"; "}" is the byte after "|", so this range is exactly one kind's.
        return int(await self.r.zlexcount(self._members, f"[{kind}|", f"({kind}}}"))

    async def claim(self) -> Claimed:
        now = self.clock.now()
        claimed, dead = await self._claim(
            keys=self._claim_keys, args=[repr(now), repr(now + self.lease), self.batch, self.max_attempts]
        )
        return Claimed([_job(r, now, self.tolerance) for r in claimed], [_job(r, now, self.tolerance) for r in dead])

    async def ack(self, job: Job) -> None:
        await self._ack(keys=[Keys.sched("lease"), Keys.sched("inflight")], args=[job.token])

    async def release(self, job: Job) -> int:
        """Hand a claimed job whose handler never started back as pending at its due (lua.RELEASE)."""
        return int(await self._release(keys=self._release_keys, args=[job.token, str(job.attempt)]))

    async def _run_one(self, job: Job) -> None:
        handler = self.handlers.get(job.kind)
        if self._stopping.is_set():  # claimed by a claim that was under way when stop() was called
            await self._hand_back(job)
            return
        self._waiting[job.token] = job
        async with self._sem:
            if self._waiting.pop(job.token, None) is None:
                return  # handed back by stop() while it waited for a slot: another replica runs it
            with structlog.contextvars.bound_contextvars(job=job.kind, job_key=job.key, incident=incident_of(job)):
                if handler is None:
                    log.warning("job_kind_unknown")
                else:
                    metrics.SCHEDULER_LAG.labels(job.kind).observe(max(0.0, self.clock.now() - job.due))
                    try:
                        await handler(job)
                    except Exception:  # one job's failure is its own: unacked, it is delivered again
                        log.exception("job_failed", attempt=job.attempt)
                        return
                await self.ack(job)

    async def _hand_back(self, job: Job) -> None:
        try:
            code = await self.release(job)
        except Exception:
            log.exception("job_release_failed", job=job.kind, job_key=job.key)  # its lease runs out instead
            return
        log.info("job_released", job=job.kind, job_key=job.key, incident=incident_of(job), code=code)

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
        except Exception:  # the error line above already says it; the audit entry is the extra
            log.exception("job_dead_audit_failed", job=job.kind, job_key=job.key)

    async def tick(self) -> int:
        """Claim and run everything due at the clock's now. Returns how many jobs ran."""
        total = 0
        while not self._stopping.is_set():
            jobs, dead = await self.claim()
            for job in dead:
                await self._dead(job)
            if not jobs:
                return total
            await asyncio.gather(*(self._run_one(j) for j in jobs))
            total += len(jobs)
            if len(jobs) < self.batch:
                return total
        return total

    async def next_due(self) -> float | None:
        head = await self.r.zrange(Keys.sched("due"), 0, 0, withscores=True)
        return float(head[0][1]) if head else None

    async def run(self) -> None:
        """The loop each replica runs: tick, then sleep until the next due (at most ``poll``).
        Returns once ``stop`` was called and the current tick's jobs are done."""
        self._loop_task = asyncio.current_task()
        # Start hooks run beside the loop so a long repair never delays a due job.
        hooks = asyncio.create_task(self._start_hooks())
        log.info("scheduler_running", poll=self.poll)
        try:
            await self._loop(self.poll)
        finally:
            hooks.cancel()

    async def stop(self, grace: float) -> None:
        """Shut down (SIGTERM): claim nothing more, hand back at once the jobs claimed but not
        started, let running handlers finish for up to ``grace`` seconds, then cancel the rest
        (left to their lease) and return when the loop has ended."""
        self._stopping.set()
        waiting, self._waiting = list(self._waiting.values()), {}
        for job in waiting:
            await self._hand_back(job)
        task = self._loop_task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            log.warning("scheduler_stop_cancelling", grace=grace)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

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
            except Exception:  # a repair that fails now (Redis not up yet, or a bug) is tried again
                log.exception("scheduler_start_hook_failed", hook=getattr(start, "__name__", "?"), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.hook_retry_max_s)

    async def _loop(self, poll: float) -> None:
        while not self._stopping.is_set():
            try:
                await self.tick()
                nxt = await self.next_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # the timer loop must not die: a failed tick is logged whole and tried again
                log.exception("scheduler_tick_failed")
                nxt = None
            wait = poll if nxt is None else min(poll, max(0.0, nxt - self.clock.now()))
            try:
                async with asyncio.timeout(wait):
                    await self._stopping.wait()  # sleeps `wait`, or less when stop() is called
            except TimeoutError:
                pass
