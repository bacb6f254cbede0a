"""An idle receiving cell (vLLM scraped, no requests in the hour) has no TTFT burn to measure: the
shipped query is 0/0 there. Its headroom reads `no traffic`, not NaN, and it can take the traffic
(issue 25): every GPU of an idle cell is free. A real Prometheus answers the query."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import T0
from tests.support.levers import OPS, say
from tests.support.prometheus import PrometheusServer, ensure_services_installed, ttft_scenario


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    busy = ttft_scenario({"us-east-2": 0.001}, start_ts=T0 - 7200, minutes=240)
    idle = ttft_scenario({"us-east-3": 0.0}, start_ts=T0 - 7200, minutes=240, requests_per_step=0)
    prom = PrometheusServer(
        tmp_path_factory.mktemp("prom"), dataclasses.replace(busy, series=busy.series + idle.series)
    )
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def policy_overrides() -> dict:
    return {}


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


async def test_an_idle_receiver_has_no_traffic_not_nan(app, cells):
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 50, "cell-us-east-3": 50}))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-2", OPS, inc.channel_id
    )
    assert "NaN" not in out, out
    assert "applied and verified" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.notes == ["headroom ok: TTFT burn 1h us-east-3 no traffic (< 1x)"], rec.notes
