"""route-weight's request rate says which figure it is (issue 34): by default each backend cell's vLLM
finished requests, which count every route into that cell, not this route's; with policy
price.route-weight.route_rate_query, the route's own requests, from which the traffic moved is read.

A real, backfilled Prometheus holds vLLM's own `vllm:request_success_total` per cell and Envoy's
`envoy_cluster_upstream_rq_total` for the route's rule. Envoy Gateway names a rule's Envoy cluster
`httproute/<namespace>/<name>/rule/<n>` (envoyproxy/gateway internal/gatewayapi/helpers.go
irRouteDestinationName) and Envoy's Prometheus stats carry it as the `envoy_cluster_name` label."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.harness import T0
from tests.support.levers import OPS, say
from tests.support.prometheus import PrometheusServer, Series, demand_series, ensure_services_installed, ttft_scenario

START, MINUTES, STEP = T0 - 7200, 240, 15
BURN = {"us-east-1": 0.2, "us-east-2": 0.001, "us-east-3": 0.001}
RATES = {"us-east-1": (30.0, 30.0), "us-east-2": (20.0, 20.0)}  # req/s into each cell, all routes
ROUTE_RPS = 12.0  # req/s through edge/chat-global rule 0
CLUSTER = "httproute/edge/chat-global/rule/0"
ROUTE_QUERY = (
    'sum(rate(envoy_cluster_upstream_rq_total{envoy_cluster_name="httproute/$namespace/$route/rule/$rule"}[5m]))'
)
CMD = "lever route-weight edge/chat-global backend=cell-us-east-1 --dry-run"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    sc = ttft_scenario(BURN, start_ts=START, minutes=MINUTES, step=STEP)
    sc.series += demand_series(RATES, T0, START, MINUTES, step=STEP)
    stamps = [START + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
    labels = {"envoy_cluster_name": CLUSTER}
    sc.series.append(
        Series("envoy_cluster_upstream_rq_total", "counter", labels, [(t, ROUTE_RPS * (t - START)) for t in stamps])
    )
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-route"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


def price_of(out: str) -> list[str]:
    lines = out.splitlines()
    assert "Price (read now):" in lines, out
    return [ln for ln in lines[lines.index("Price (read now):") + 1 :] if ln.startswith("• ")]


async def test_by_default_the_rate_is_the_cells_and_says_so(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    price = price_of(await say(app, CMD, OPS, inc.channel_id))
    # Weights 50/100 → 25/75: a third of what cell-us-east-1 serves, on every route into it.
    assert (
        "• traffic moved off cell-us-east-1: 10 req/s (cell-us-east-1 serves 30 req/s now "
        "(its cell's vLLM finished requests, all routes); the step takes 33%)" in price
    ), price
    assert (
        "• receiver cell-us-east-2 (us-east-2): 20 → 30 req/s after the step "
        "(its cell's vLLM finished requests, all routes); TTFT burn 1h 0.10x" in price
    ), price


@pytest.mark.parametrize("policy_overrides", [{"price": {"route-weight": {"route_rate_query": ROUTE_QUERY}}}])
async def test_with_a_route_query_the_traffic_moved_is_this_routes(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    price = price_of(await say(app, CMD, OPS, inc.channel_id))
    # Its share of the route goes from 50% to 33.3%: 16.7% of the route's 12 req/s.
    assert (
        "• traffic moved off cell-us-east-1: 2 req/s (this route's 12 req/s "
        "(policy price.route-weight.route_rate_query) x 16.7% of its traffic)" in price
    ), price
    assert (
        "• receiver cell-us-east-2 (us-east-2): 20 → 22 req/s after the step "
        "(its cell's vLLM finished requests, all routes); TTFT burn 1h 0.10x" in price
    ), price


@pytest.mark.parametrize(
    "policy_overrides",
    [{"price": {"route-weight": {"route_rate_query": ROUTE_QUERY.replace("$route", "$route-other")}}}],
)
async def test_a_route_query_with_no_series_is_unknown_not_the_cells(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    price = price_of(await say(app, CMD, OPS, inc.channel_id))
    assert (
        "• traffic moved off cell-us-east-1: unknown (this route's rate: no data (the query matches no series))"
        in price
    ), price
