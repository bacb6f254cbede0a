"""keda-pause's demand trend is asked of the Prometheus KEDA scales on, the trigger's `serverAddress`,
when it answers; else of Firebreak's, and the price says whose figure it is and why (issue 34).

Two real, backfilled Prometheus servers with different figures for the same vLLM series
(`vllm:num_requests_waiting`, vLLM's own gauge): Firebreak's (PROMETHEUS_URL) and the trigger's.
The figure in the price tells which one answered."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from tests.support.harness import T0
from tests.support.levers import OPS, say
from tests.support.ports import free_port
from tests.support.prometheus import PrometheusServer, Series, ensure_services_installed

QUERY = 'sum(vllm:num_requests_waiting{model_name="llm-70b"})'
START, END, STEP = T0 - 3600, T0 + 3600, 15


def waiting(at_t0: float, before: float) -> list[tuple[float, float]]:
    """`before` until 15 min before T0, then `at_t0` (trend_minutes is 15: the price reads both)."""
    stamps = [START + i * STEP for i in range(int((END - START) / STEP) + 1)]
    return [(t, before if t <= T0 - 900 else at_t0) for t in stamps]


def gauge(value_at_t0: float, before: float) -> list[Series]:
    labels = {"cell": "us-east-3", "pod": "vllm-0", "model_name": "llm-70b", "engine": "0"}
    return [Series("vllm:num_requests_waiting", "gauge", labels, waiting(value_at_t0, before))]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Firebreak's Prometheus (20 → 60 waiting) and the trigger's (5 → 8)."""
    ensure_services_installed()
    ours = PrometheusServer(tmp_path_factory.mktemp("prom-firebreak"), gauge(60, 20))
    theirs = PrometheusServer(tmp_path_factory.mktemp("prom-trigger"), gauge(8, 5))
    asyncio.run(ours.start())
    asyncio.run(theirs.start())
    yield ours, theirs
    asyncio.run(theirs.stop())
    asyncio.run(ours.stop())


@pytest.fixture
def app_settings(servers) -> dict:
    return {"prometheus_url": servers[0].url}


async def demand_line(app, cells, name: str, metadata: dict) -> str:
    so = samples.scaled_object(name=name, target="llm-70b")
    so["spec"]["scaleTargetRef"] = {"name": "llm-70b"}
    so["spec"]["triggers"][0]["metadata"] = {"query": QUERY, "threshold": "20", **metadata}
    cells.east3.put(so)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever keda-pause serve-chat/{name} --dry-run", OPS, inc.channel_id)
    [line] = [ln for ln in out.splitlines() if ln.startswith(f"• demand (trigger 0: {QUERY})")]
    return line


async def test_the_trend_is_the_triggers_prometheus_when_it_answers(app, cells, servers):
    _, theirs = servers
    line = await demand_line(app, cells, "llm-70b-own", {"serverAddress": theirs.url})
    assert line == (
        f"• demand (trigger 0: {QUERY}): 8 now (15 min ago 5: rising; the trigger's Prometheus {theirs.url})"
    ), line


async def test_an_unreachable_trigger_server_gives_firebreaks_figure_and_says_so(app, cells):
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    line = await demand_line(app, cells, "llm-70b-gone", {"serverAddress": gone})
    assert line.startswith(
        f"• demand (trigger 0: {QUERY}): 60 now (15 min ago 20: rising; Firebreak's Prometheus; "
        f"the trigger's {gone} did not answer (Prometheus can't be reached ("
    ), line


async def test_a_trigger_asked_with_headers_firebreak_cannot_send_is_not_asked(app, cells, servers):
    """KEDA sends customHeaders (a tenant, say): asked without them, the server may answer for another."""
    _, theirs = servers
    meta = {"serverAddress": theirs.url, "customHeaders": "X-Scope-OrgID=serving"}
    line = await demand_line(app, cells, "llm-70b-tenant", meta)
    assert line == (
        f"• demand (trigger 0: {QUERY}): 60 now (15 min ago 20: rising; Firebreak's Prometheus; "
        f"the trigger's {theirs.url} is not asked: KEDA sends it customHeaders, which Firebreak does not)"
    ), line


async def test_a_trigger_on_firebreaks_own_prometheus_says_so(app, cells, servers):
    ours, _ = servers
    line = await demand_line(app, cells, "llm-70b-same", {"serverAddress": ours.url + "/"})
    assert line == (
        f"• demand (trigger 0: {QUERY}): 60 now (15 min ago 20: rising; Firebreak's Prometheus, "
        "the trigger's serverAddress)"
    ), line
