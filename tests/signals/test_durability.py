"""A delivery answered 200 is in Redis: it survives Redis being killed (AOF) and restarted. When
Redis cannot take it, the answer is 503, so Alertmanager sends it again, and nothing half-made stays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.killed_redis import aof_redis, kill, restart
from tests.support.redis_server import RedisServer
from tests.support.signals import CELL_A, incidents, payload, post, settle, summaries, wire


@pytest.fixture
def aof(tmp_path: Path) -> Iterator[RedisServer]:
    yield from aof_redis(tmp_path)


@pytest.fixture
def redis_url(aof: RedisServer) -> str:
    return aof.url


async def test_an_answered_delivery_survives_redis_being_killed(app, aof):
    status, _ = await post(app, payload([wire("CellTTFTBurnFast", node="gpu-1")]))
    assert status == 200
    kill(aof)
    await restart(aof, app.services.redis)
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.cells == [CELL_A]
    await settle(app, lambda: _one(summaries(app, inc.channel_id)))


async def _one(items):
    return items or None


async def test_when_redis_is_down_the_answer_is_503_so_alertmanager_sends_it_again(app, aof):
    kill(aof)
    status, body = await post(app, payload([wire("CellTTFTBurnFast")]))
    assert status == 503 and "store_unreachable" in body["error"]
    await restart(aof, app.services.redis)
    assert await incidents(app) == []
    status, _ = await post(app, payload([wire("CellTTFTBurnFast")]))  # Alertmanager's retry
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.cells == [CELL_A]
