"""A Redis a test can SIGKILL and bring back with its data, as a Redis with AOF comes back in
production: a private redis-server whose append-only file is fsynced on every write.

A test module makes ``aof_redis`` its fixture and overrides ``redis_url`` with its url, so the app
under test runs against it (tests/levers/test_settle_live.py, tests/core/test_intents.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

from bot.store import Redis
from tests.support.redis_server import RedisServer


def aof_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server with an fsync-always AOF, stopped when the generator ends."""
    data = tmp_path / "redis"
    data.mkdir()
    srv = RedisServer(appendonly=True, data_dir=data).start()
    yield srv
    srv.stop()


def kill(srv: RedisServer) -> None:
    """SIGKILL: no shutdown, no final save (what is in the AOF is what survives)."""
    assert srv.proc is not None
    srv.proc.kill()
    srv.proc.wait(5)


async def restart(srv: RedisServer, client: Redis, timeout: float = 15.0) -> None:
    """Start the killed server again on its port and data dir, and wait until ``client`` (the
    app's own) answers again."""
    srv.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await client.ping():
                return
        except Exception:  # noqa: BLE001 - still reconnecting
            pass
        assert time.monotonic() < deadline, "the app's Redis client did not come back"
        await asyncio.sleep(0.05)
