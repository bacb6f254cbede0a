from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from bot.clock import ManualClock
from fbworld.kube import tls
from fbworld.slack import FakeSlack
from tests.support import harness
from tests.support.harness import T0, RunningApp, start_app
from tests.support.redis_server import RedisServer
from tests.support.redis_topologies import ClusterSetup

# The modules that take longest, longest first. xdist's loadfile hands out files in collection order
# (.ci/run passes --no-loadscope-reorder: its own order counts tests, and these heavy modules have few);
# a minute-long module handed out last runs alone while the other workers sit idle.
HEAVY_FIRST = ("tests/reliability/", "tests/realkube/", "world/tests/drills/", "tests/audit/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heavy modules first, then the rest by their number of tests, most first (xdist's own order)."""
    per_file: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        per_file[path] = per_file.get(path, 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int, str]:
        path = item.nodeid.split("::", 1)[0]
        heavy = next((i for i, p in enumerate(HEAVY_FIRST) if path.startswith(p)), len(HEAVY_FIRST))
        return heavy, -per_file[path], path

    items.sort(key=rank)  # stable: a module's tests keep their order


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "stakeholders: the comms app posts public updates to a stakeholder channel (tests/comms/conftest.py)"
    )


# FIREBREAK_TEST_REDIS=cluster runs the tests that take `redis_url` against a three-master Redis
# Cluster instead of one server (.ci/run's cluster step): the product's own client, the same tests.
ON_CLUSTER = os.environ.get("FIREBREAK_TEST_REDIS") == "cluster"


@pytest.fixture(scope="session", autouse=True)
def _no_key_material_left() -> Iterator[None]:
    """The Kubernetes emulator's throwaway CA and key go with the test process."""
    yield
    tls.discard()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    srv = RedisServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ClusterSetup]:
    cluster = ClusterSetup().start()
    yield cluster
    cluster.stop()


@pytest.fixture
async def redis_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if ON_CLUSTER:
        cluster: ClusterSetup = request.getfixturevalue("redis_cluster")
        cluster.flush()
        yield cluster.url
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    r = aioredis.from_url(server.url)
    await r.flushall()
    await r.aclose()
    yield server.url


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
def mode() -> str:
    """How Slack reaches the app: "http", or "socket" (Socket Mode). A module runs in both with
    ``pytestmark = pytest.mark.parametrize("mode", MODES)`` (tests/support/harness.py; the list of
    such suites is in docs/operating.md)."""
    return "http"


@pytest.fixture(autouse=True)
def _start_app_in_mode(mode: str) -> Iterator[None]:
    """Every app a test starts without naming a mode is in the test's (harness.mode_of_test)."""
    harness.mode_of_test = mode
    yield
    harness.mode_of_test = "http"


@pytest.fixture
async def app(slack: FakeSlack, redis_url: str, clock: ManualClock, mode: str) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, redis_url, clock, mode=mode)
    yield running
    await running.stop()
