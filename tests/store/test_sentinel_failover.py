"""REDIS_URL=redis+sentinel://: the master is SIGKILLed under load (a master, a replica and three
Sentinels, real servers). Every write answered as done is on the new master, the audit chain
still verifies, no write ran twice, and the calls in flight finish within the failover."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from bot.audit.chain import AuditLog
from bot.clock import SystemClock
from bot.store import Keys, connect, script, write
from tests.support.redis_topologies import SentinelSetup
from tests.support.wait import until

# Each call appends one token to its own list: run twice, it would hold the token twice.
_PUSH = "redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('LLEN', KEYS[1])"


@pytest.fixture
def sentinel() -> Iterator[SentinelSetup]:
    setup = SentinelSetup().start()
    yield setup
    setup.stop()


async def test_a_master_killed_mid_load_loses_nothing_answered_and_runs_nothing_twice(sentinel):
    r = connect(sentinel.url)
    audit = AuditLog(r, SystemClock())
    push = script(r, _PUSH)
    done_audit: list[str] = []
    done_push: list[tuple[str, str]] = []
    failed: list[BaseException] = []
    slowest = 0.0
    stop = asyncio.Event()

    async def writer(n: int) -> None:
        nonlocal slowest
        i = 0
        while not stop.is_set():
            i += 1
            token = f"w{n}-{i}"
            key = Keys.approvals(f"INC-{n}", "load")  # per-incident, as ballots are
            try:
                t0 = time.monotonic()
                await audit.append("load.tick", actor="system", detail={"token": token}, request_id=token)
                done_audit.append(token)
                t1 = time.monotonic()
                await push(keys=[key], args=[token])
                done_push.append((key, token))
                t2 = time.monotonic()
                await write(r, ("HSET", Keys.levers(f"req:{token}"), "state", "done"))
                slowest = max(slowest, t1 - t0, t2 - t1, time.monotonic() - t2)
            except Exception as exc:  # noqa: BLE001 - counted and asserted on below
                failed.append(exc)

    tasks = [asyncio.create_task(writer(n)) for n in range(8)]
    await until(lambda: len(done_audit) > 50, 30, "the load runs before the kill")
    before = len(done_audit)
    old = sentinel.master.port
    killed_at = time.monotonic()
    sentinel.master.kill()
    new = await asyncio.to_thread(sentinel.wait_failover, old)
    promoted_after = time.monotonic() - killed_at
    # Load goes on against the new master (slower: with its replica dead, each write waits out
    # WAIT's 500 ms and is logged store_write_unreplicated).
    at_failover = len(done_audit)
    await until(lambda: len(done_audit) >= at_failover + 8, 30, "the load goes on after the failover")
    stop.set()
    await asyncio.gather(*tasks)

    print(f"promoted after {promoted_after:.2f} s; slowest call {slowest:.2f} s; failed {failed[:3]}")
    assert failed == [], failed[:3]
    assert before > 50 and len(done_audit) >= at_failover + 8, "the load ran before and went on after the failover"
    # What was answered as done is on the new master, once.
    raw = redis.Redis(port=new, decode_responses=True)
    assert raw.info("replication")["role"] == "master"
    tokens = [e["detail"]["token"] async for e in audit.entries() if e["action"] == "load.tick"]
    assert sorted(tokens) == sorted(done_audit), "an acknowledged audit entry was lost or written twice"
    assert await audit.verify() is None
    by_key: dict[str, list[str]] = {}
    for key, token in done_push:
        by_key.setdefault(key, []).append(token)
    for key, want in by_key.items():
        assert raw.lrange(key, 0, -1) == want, key
    # A call caught by the kill finished soon after Sentinel named the new master: within the
    # fail-fast gate's second and a retry pause, and the audit chain's head retries, each of which
    # waits out WAIT's 500 ms on a master whose only replica is the one killed.
    assert slowest < promoted_after + 6.0, (slowest, promoted_after)
    await r.aclose()


async def test_a_dropped_connection_reconnects_through_sentinel_not_to_its_old_address(sentinel):
    """redis-py reconnects a dropped connection (a pipeline's, while it loads scripts) straight to
    the address it last had; after a failover that is the dead master. Ours asks Sentinel again."""
    from tests.support.ports import free_port

    r = connect(sentinel.url)
    try:
        await r.ping()
        conn = await r.connection_pool.get_connection()
        try:
            await conn.disconnect()
            conn.host, conn.port = "127.0.0.1", free_port()  # where a killed master was: nothing listens
            await conn.send_command("PING")
            assert await conn.read_response() == "PONG"
            assert conn.port == sentinel.master.port
        finally:
            await r.connection_pool.release(conn)
    finally:
        await r.aclose()
