"""Redis SIGKILLed and restarted with its append-only file while an approval card waits: a second
after Redis answers again, three Approve clicks run the approved lever exactly once, and none of them
is told the store can't be reached (issue 26, item 4).

The app's pooled connections all died with the old server; the fix is that a dead one is found and
replaced before a command is sent on it (a command that never left is retried once), so the
store's fail-fast gate opens only when Redis really does not answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from levers.requests import LeverState
from levers.store import lever_store
from tests.support.approvals import request_drain
from tests.support.killed_redis import aof_redis, kill
from tests.support.redis_server import RedisServer


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from aof_redis(tmp_path)


@pytest.fixture
def redis_url(own_redis: RedisServer) -> str:  # the approvals `world` runs against this test's own Redis
    return own_redis.url


async def answered_again(srv: RedisServer, timeout: float = 15.0) -> None:
    """Start the killed server on its port and data, and wait until a NEW client (not the app's,
    whose pool must find out for itself) gets PONG."""
    srv.start()
    deadline = time.monotonic() + timeout
    while True:
        probe = aioredis.Redis.from_url(srv.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            if await probe.ping():
                return
        except (aioredis.ConnectionError, aioredis.TimeoutError, OSError):
            pass
        finally:
            await probe.aclose()
        assert time.monotonic() < deadline, "Redis did not come back"
        await asyncio.sleep(0.05)


async def test_three_clicks_a_second_after_a_redis_restart_run_the_lever_once(world, own_redis):
    rid = await request_drain(world)
    # Every connection in the app's pool has been used (the pull, its card): all of them die below.
    assert world.patches() == []

    kill(own_redis)
    await answered_again(own_redis)
    await asyncio.sleep(1.0)

    replies = await asyncio.gather(*(world.press("lever.approve", rid, user="U_IC") for _ in range(3)))

    unreachable = [r for r in replies if "can't reach its store" in r]
    assert not unreachable, replies
    rec = await lever_store(world.svc).get(rid)
    assert rec is not None and rec.state is LeverState.done, (rec and rec.state, replies)
    assert len(world.patches()) == len(rec.plan["calls"]), replies  # exactly once
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "HoldAndDrain"
