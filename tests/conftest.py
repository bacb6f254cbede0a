from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from bot.clock import ManualClock
from tests.fakes.slack import FakeSlack
from tests.harness import RunningApp, start_app
from tests.support.redis_server import RedisServer

# 2026-11-30 03:10:00 UTC: a believable 3 a.m.
T0 = 1_796_008_200.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "stakeholders: the comms app posts public updates to a stakeholder channel (tests/comms/conftest.py)"
    )


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    srv = RedisServer().start()
    yield srv
    srv.stop()


@pytest.fixture
async def redis_url(redis_server: RedisServer) -> AsyncIterator[str]:
    r = aioredis.from_url(redis_server.url)
    await r.flushall()
    await r.aclose()
    yield redis_server.url


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def app(slack: FakeSlack, redis_url: str, clock: ManualClock) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, redis_url, clock)
    yield running
    await running.stop()


async def audit_entries(app: RunningApp, incident: str | None = None) -> list[dict]:
    return [e async for e in app.services.audit.entries(incident)]


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)
