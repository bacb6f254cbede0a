"""The durable scheduler against a real Redis: upsert, cancel, one delivery, leases, late."""

from __future__ import annotations

import asyncio
import functools

import fakeredis
import pytest
import redis.asyncio as aioredis

from bot.clock import ManualClock
from bot.scheduler import Job, Scheduler
from tests.support.harness import T0

SEEN: list[tuple[str, Job]] = []
FAIL: set[str] = set()


async def _echo(who: str, job: Job) -> None:
    if job.key in FAIL:
        raise RuntimeError("handler crashed")
    await asyncio.sleep(0.001)  # a handler does I/O; lets the other claimers in
    SEEN.append((who, job))


def _sched(r, clock, who: str = "svc", **kw) -> Scheduler:
    """A scheduler whose one job kind, test.echo, records (who ran it, the job)."""
    s = Scheduler(r, clock, **kw)
    s.bind({"test.echo": functools.partial(_echo, who)}, [])
    return s


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()
    FAIL.clear()


@pytest.fixture
async def r(redis_url):
    conn = aioredis.from_url(redis_url, decode_responses=True)
    yield conn
    await conn.aclose()


async def test_upsert_moves_the_one_pending_job_and_cancel_drops_it(r):
    clock = ManualClock(T0)
    s = _sched(r, clock)
    await s.schedule("test.echo", "a", T0 + 10, {"n": 1})
    await s.schedule("test.echo", "a", T0 + 20, {"n": 2})
    await s.schedule("test.echo", "b", T0 + 5, {})
    await s.cancel("test.echo", "b")
    assert await s.pending("test.echo", "a") == T0 + 20
    clock.set(T0 + 19.9)
    assert await s.tick() == 0
    clock.set(T0 + 20)
    assert await s.tick() == 1
    assert [(j.key, j.payload, j.due, j.late) for _, j in SEEN] == [("a", {"n": 2}, T0 + 20, False)]
    assert await s.tick() == 0  # delivered once; nothing left


async def test_due_time_keeps_sub_second_precision(r):
    clock = ManualClock(T0)
    s = _sched(r, clock)
    due = T0 + 0.123456
    await s.schedule("test.echo", "p", due, {"big": 10**15, "list": []})
    clock.set(T0 + 1)
    await s.tick()
    assert SEEN[0][1].due == due
    assert SEEN[0][1].payload == {"big": 10**15, "list": []}


async def test_many_claimers_deliver_each_job_exactly_once(r, redis_url):
    clock = ManualClock(T0)
    conns = [aioredis.from_url(redis_url, decode_responses=True) for _ in range(3)]
    scheds = [_sched(c, clock, f"p{n}", batch=7) for n, c in enumerate(conns)]
    for i in range(300):
        await scheds[i % 3].schedule("test.echo", f"k{i}", T0 + i % 5, {"i": i})
    for step in range(6):
        clock.set(T0 + step)
        await asyncio.gather(*(s.tick() for s in scheds))
    keys = [j.key for _, j in SEEN]
    assert sorted(keys) == sorted(f"k{i}" for i in range(300))
    assert len({p for p, _ in SEEN}) == 3  # the work really was shared
    for c in conns:
        await c.aclose()


async def test_job_due_while_everything_was_down_fires_once_late(r, redis_url):
    clock = ManualClock(T0)
    await _sched(r, clock).schedule("test.echo", "x", T0 + 60, {})
    clock.set(T0 + 3600)  # "restart" an hour later: a fresh scheduler and connection
    fresh = aioredis.from_url(redis_url, decode_responses=True)
    s2 = _sched(fresh, clock)
    assert await s2.tick() == 1
    assert await s2.tick() == 0
    assert SEEN[0][1].late is True
    await fresh.aclose()


async def test_claimer_that_dies_is_replaced_after_the_lease(r):
    clock = ManualClock(T0)
    s = _sched(r, clock, lease=30)
    await s.schedule("test.echo", "crash", T0, {})
    claimed = (await s.claim()).jobs  # claimed, then the process "dies" without acking
    assert [j.key for j in claimed] == ["crash"]
    clock.set(T0 + 29)
    assert await s.tick() == 0
    clock.set(T0 + 31)
    assert await s.tick() == 1
    assert SEEN[0][1].attempt == 2 and SEEN[0][1].late


async def test_failing_handler_is_retried_then_dead_lettered(r):
    clock = ManualClock(T0)
    s = _sched(r, clock, lease=10, max_attempts=2)
    FAIL.add("boom")
    await s.schedule("test.echo", "boom", T0, {})
    await s.tick()
    clock.advance(11)
    await s.tick()  # attempt 2 fails too
    clock.advance(11)
    await s.tick()
    assert await r.hlen("fb:{sched}:dead") == 1
    assert await r.hlen("fb:{sched}:inflight") == 0


async def test_rescheduling_while_in_flight_keeps_the_new_job(r):
    clock = ManualClock(T0)
    s = _sched(r, clock)
    await s.schedule("test.echo", "m", T0, {"v": 1})
    [old] = (await s.claim()).jobs
    await s.schedule("test.echo", "m", T0 + 5, {"v": 2})
    await s.ack(old)
    clock.set(T0 + 5)
    await s.tick()
    assert [j.payload["v"] for _, j in SEEN] == [2]


async def test_embedded_store_runs_the_same_scripts():
    clock = ManualClock(T0)
    s = _sched(fakeredis.FakeAsyncRedis(decode_responses=True), clock)
    await s.schedule("test.echo", "e", T0 + 1, {"z": 1})
    clock.advance(1)
    assert await s.tick() == 1


async def test_unknown_kind_is_dropped_not_retried(r):
    clock = ManualClock(T0)
    s = _sched(r, clock)
    await s.schedule("test.nobody", "q", T0, {})
    assert "test.nobody" not in s.handlers
    assert await s.tick() == 1
    assert await r.hlen("fb:{sched}:inflight") == 0


async def test_kind_with_separator_is_refused(r):
    with pytest.raises(ValueError):
        await _sched(r, ManualClock(T0)).schedule("a|b", "k", T0, {})
