"""The simulated Prometheus (bot/demo/prometheus.py) through the real protocol: started on a loopback
port and asked by the product's own client (bot.prom), or raw HTTP where the client can't say it.
Where it matters (label sets, error answers) its answers are checked against a real Prometheus
backfilled with the exporters' series."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from string import Template

import aiohttp
import pytest

from bot.clock import ManualClock
from bot.policy import load_policy
from bot.policy.sections import Policy
from bot.postmortem import impact
from bot.prom import Failed, Matrix, Vector, Why
from bot.prom.connect import Prometheus
from bot.triage import rules, streams
from fbworld.fleet import trigger_query
from fbworld.metrics import FIGURES, HEALTHY, FleetMetrics
from fbworld.prometheus import NOT_SIMULATED, TOO_MANY_POINTS, DemoPrometheus, format_timestamp, format_value
from tests.support.harness import T0
from tests.support.prometheus import (
    CellHealth,
    PrometheusServer,
    demand_series,
    ensure_services_installed,
    health_series,
    ttft_scenario,
)
from tests.support.triage import serve

REPO = Path(__file__).resolve().parents[3]
CELLS = ("us-east-1", "us-east-2", "us-east-3")
SICK = "us-east-3"
XID_ALERT = 'max by (cell) (DCGM_FI_DEV_XID_ERRORS{cell="us-east-3"} != 0) > 0'


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy(REPO / "policies")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def metrics(clock: ManualClock) -> FleetMetrics:
    return FleetMetrics(CELLS, clock.now)


@pytest.fixture
async def demo(metrics: FleetMetrics, policy: Policy) -> AsyncIterator[DemoPrometheus]:
    async with DemoPrometheus(metrics, policy) as server:
        yield server


@pytest.fixture
def prom(demo: DemoPrometheus) -> Prometheus:
    return Prometheus(demo.url)


def triage_text(policy: Policy, name: str, cell: str) -> str:
    """A triage query as `/incident triage` sends it (bot/triage/snapshot.py)."""
    q = next(q for q in policy.queries.queries if q.name == name)
    nq = policy.levers.node_quarantine
    return q.render(cell, nq.taint_key, nq.dedicated_taints, nq.gpu_node_selector)


def headroom_text(policy: Policy, cell: str) -> str:
    """The headroom query as route-weight sends it (levers/headroom.py)."""
    return Template(policy.levers.headroom.query).safe_substitute(cell=cell)


def rate_text(policy: Policy, cell: str) -> str:
    """route-weight's price query as it sends it (levers/catalogue/route.py)."""
    return policy.levers.price.route_weight.render(cell)


def by_cell(got: object) -> dict[str, float]:
    assert isinstance(got, Vector), got
    out = {s.labels["cell"]: s.value for s in got.samples}
    assert [dict(s.labels) for s in got.samples] == [{"cell": c} for c in out], "labels other than cell"
    return out


async def raw(url: str, path: str, params: dict[str, str], method: str = "GET") -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        if method == "POST":
            resp = await session.post(url + path, data=params)
        else:
            resp = await session.get(url + path, params=params)
        async with resp:
            return resp.status, await resp.json(content_type=None)


# ------------------------------------------------------------------------------- the policy's queries


def test_the_fleet_has_a_figure_for_every_default_triage_query(policy: Policy):
    assert {q.name for q in policy.queries.queries} | {"demand", "waiting"} == set(FIGURES)


async def test_every_triage_query_answers_every_cell_with_its_healthy_figure(prom: Prometheus, policy: Policy):
    for q in policy.queries.queries:
        for cell in CELLS:
            got = await prom.query(triage_text(policy, q.name, cell), T0)
            assert by_cell(got) == {cell: HEALTHY[q.name]}, (q.name, cell)


def test_the_healthy_fleet_is_healthy_by_the_policys_own_thresholds(policy: Policy):
    assert HEALTHY["burn_fast"] < policy.levers.headroom.max_burn and HEALTHY["burn_slow"] < 1
    assert HEALTHY["ttft_p99"] < 2.0  # the TTFT SLO
    assert 0 <= HEALTHY["kv_cache"] < 0.9 and HEALTHY["demand"] > policy.queries.changed.demand.idle_below
    for count in ("preemptions", "xid_gpus", "ecc_dbe", "row_remap_pending", "quarantined", "kueue_pending"):
        assert HEALTHY[count] == 0


async def test_a_change_shows_from_its_time_on_and_the_past_keeps_what_was_true(
    prom: Prometheus, metrics: FleetMetrics, clock: ManualClock, policy: Policy
):
    metrics.set(SICK, "kv_cache", 0.97, at=T0 - 600)
    clock.advance(60)
    metrics.set(SICK, "xid_gpus", 2)  # now
    kv, xid = triage_text(policy, "kv_cache", SICK), triage_text(policy, "xid_gpus", SICK)

    assert by_cell(await prom.query(kv, T0)) == {SICK: 0.97}
    assert by_cell(await prom.query(kv, T0 - 601)) == {SICK: HEALTHY["kv_cache"]}
    assert by_cell(await prom.query(xid, T0 + 60)) == {SICK: 2}
    assert by_cell(await prom.query(xid, T0 + 59.999)) == {SICK: 0}
    assert by_cell(await prom.query(triage_text(policy, "kv_cache", "us-east-1"), T0)) == {"us-east-1": 0.55}


async def test_a_query_without_a_time_is_answered_at_the_fleets_now(demo: DemoPrometheus, metrics, clock, policy):
    metrics.set(SICK, "kueue_pending", 12, at=T0 + 100)
    query = {"query": triage_text(policy, "kueue_pending", SICK)}
    assert (await raw(demo.url, "/api/v1/query", query))[1]["data"]["result"][0]["value"] == [T0, "0"]
    clock.advance(100.25)
    assert (await raw(demo.url, "/api/v1/query", query))[1]["data"]["result"][0]["value"] == [T0 + 100.25, "12"]


async def test_the_demand_query_answers_every_cell_and_changed_sees_the_shift(prom, metrics, policy):
    query = policy.queries.changed.demand.query
    assert by_cell(await prom.query(query, T0)) == dict.fromkeys(CELLS, 40.0)

    metrics.set("us-east-2", "demand", 0.0, at=T0 - 3600)  # drained an hour ago…
    metrics.set(SICK, "demand", 80.0, at=T0 - 3600)  # …into the sick cell
    got = await streams.demand(prom, query, T0, 3)
    assert got == {
        "us-east-1": rules.Demand(40.0, 40.0),
        "us-east-2": rules.Demand(40.0, 0.0),
        SICK: rules.Demand(40.0, 80.0),
    }


async def test_headroom_answers_the_cells_fast_burn(prom, metrics, policy):
    metrics.set(SICK, "burn_fast", 14.4, at=T0 - 60)
    for cell in CELLS:
        want = 14.4 if cell == SICK else HEALTHY["burn_fast"]
        assert by_cell(await prom.query(headroom_text(policy, cell), T0)) == {cell: want}


async def test_a_headroom_query_unlike_the_triage_one_is_matched_on_its_own(metrics, policy):
    other = 'max by (cell) (slo:ttft_burn:1h{cell="$cell"})'
    levers = policy.levers.model_copy(update={"headroom": policy.levers.headroom.model_copy(update={"query": other})})
    custom = policy.model_copy(update={"levers": levers})
    metrics.set("us-east-1", "burn_fast", 0.5, at=T0 - 60)
    async with DemoPrometheus(metrics, custom) as server:
        got = await Prometheus(server.url).query(other.replace("$cell", "us-east-1"), T0)
    assert by_cell(got) == {"us-east-1": 0.5}


async def test_route_weights_price_reads_the_cells_demand_as_one_unlabelled_sample(prom, metrics, policy):
    metrics.set(SICK, "demand", 25.0, at=T0 - 60)
    for cell in CELLS:
        got = await prom.query(rate_text(policy, cell), T0)
        assert isinstance(got, Vector) and [dict(s.labels) for s in got.samples] == [{}], got
        assert got.samples[0].value == (25.0 if cell == SICK else HEALTHY["demand"])


async def test_a_trigger_registered_without_its_cell_label_answers_always_and_unlabelled(prom, demo, metrics):
    demo.register(trigger_query(SICK), SICK, "waiting", by_cell=False)
    metrics.set(SICK, "waiting", 30.0, at=T0 - 60)
    got = await prom.query(trigger_query(SICK), T0)
    assert isinstance(got, Vector) and [(dict(s.labels), s.value) for s in got.samples] == [({}, 30.0)]
    before = await prom.query(trigger_query(SICK), T0 - 900)
    assert isinstance(before, Vector) and [s.value for s in before.samples] == [HEALTHY["waiting"]]
    # The other cells' triggers were not registered: not simulated, never another cell's number.
    assert isinstance(await prom.query(trigger_query("us-east-1"), T0), Failed)


async def test_whitespace_does_not_matter(prom, policy):
    text = triage_text(policy, "burn_slow", SICK)
    assert by_cell(await prom.query("\n  " + text.replace(" ", "   \n\t") + "  ", T0)) == {SICK: 0.1}


# ------------------------------------------------------------------------------- over time


async def test_a_range_query_has_a_point_a_step_with_what_was_true_then(prom, metrics, policy):
    metrics.set(SICK, "ttft_p99", 4.8, at=T0 - 90)
    got = await prom.query_range(triage_text(policy, "ttft_p99", SICK), T0 - 240, T0, 60)
    assert isinstance(got, Matrix)
    [series] = got.series
    assert dict(series.labels) == {"cell": SICK}
    assert series.points == ((T0 - 240, 0.85), (T0 - 180, 0.85), (T0 - 120, 0.85), (T0 - 60, 4.8), (T0, 4.8))


async def test_a_registered_alert_expression_has_points_only_while_its_condition_holds(prom, demo, metrics):
    demo.register(XID_ALERT, SICK, "xid_gpus", ">", 0)
    metrics.set(SICK, "xid_gpus", 1, at=T0 - 1800)
    metrics.set(SICK, "xid_gpus", 0, at=T0 - 1200)  # a blip, over
    metrics.set(SICK, "xid_gpus", 3, at=T0 - 600)  # and back: the alert fired at T0
    assert by_cell(await prom.query(XID_ALERT, T0)) == {SICK: 3}
    assert by_cell(await prom.query(XID_ALERT, T0 - 900)) == {}  # PromQL filter: no series, not 0

    first, last = impact.window(T0)
    got = await prom.query_range(XID_ALERT, first, last, impact.STEP_S)
    assert isinstance(got, Matrix)
    times = [t for t, _ in got.series[0].points]
    assert times[0] == T0 - 1800 and max(t for t in times if t < T0 - 600) == T0 - 1260
    # The postmortem dates the condition from the last run that reaches the alert's startsAt.
    found, start, _, whole = impact.judge(got, T0)
    assert (found, start, whole) == (impact.Found.run, T0 - 600, False)


async def test_a_registered_expression_answers_each_cell_it_was_registered_for(prom, demo, metrics):
    fleet_wide = "max by (cell) (vllm:kv_cache_usage_perc) >= 0.95"
    for cell in CELLS:
        demo.register(fleet_wide, cell, "kv_cache", ">=", 0.95)
    metrics.set("us-east-1", "kv_cache", 0.95, at=T0 - 60)
    metrics.set(SICK, "kv_cache", 0.99, at=T0 - 60)
    assert by_cell(await prom.query(fleet_wide, T0)) == {"us-east-1": 0.95, SICK: 0.99}


def test_register_refuses_what_it_cannot_answer(demo: DemoPrometheus):
    with pytest.raises(ValueError, match="us-east-1, us-east-2, us-east-3"):
        demo.register(XID_ALERT, "eu-west-9", "xid_gpus", ">", 0)
    with pytest.raises(ValueError, match="ttft_p99"):
        demo.register(XID_ALERT, SICK, "xids", ">", 0)
    with pytest.raises(ValueError, match=">, >=, <, <="):
        demo.register(XID_ALERT, SICK, "xid_gpus", "!=", 0)


# ------------------------------------------------------------------------------- derived figures


async def test_a_derived_figure_answers_its_source_now_and_none_is_no_data(prom, metrics, policy):
    source: dict[str, float | None] = {"us-east-1": 0.2, "us-east-2": None}
    metrics.derive("quarantined", lambda cell: source.get(cell, 0.0))
    assert by_cell(await prom.query(triage_text(policy, "quarantined", "us-east-1"), T0)) == {"us-east-1": 0.2}
    assert by_cell(await prom.query(triage_text(policy, "quarantined", "us-east-2"), T0)) == {}
    source["us-east-1"] = 0.3
    assert by_cell(await prom.query(triage_text(policy, "quarantined", "us-east-1"), T0 - 3600)) == {"us-east-1": 0.3}
    with pytest.raises(ValueError, match="derived"):
        metrics.set("us-east-1", "quarantined", 0.5)


async def test_a_derived_figure_is_read_once_per_range_query(prom, metrics, policy):
    reads: list[str] = []

    def source(cell: str) -> float:
        reads.append(cell)
        return 0.05

    metrics.derive("quarantined", source)
    got = await prom.query_range(triage_text(policy, "quarantined", "us-east-1"), T0 - 3600, T0, 15)
    assert isinstance(got, Matrix) and len(got.series[0].points) == 241
    assert {v for _, v in got.series[0].points} == {0.05}
    assert reads == ["us-east-1"]


async def test_a_derived_source_that_fails_is_a_failed_query_not_a_number(prom, metrics, policy):
    def broken(cell: str) -> float:
        raise ConnectionError("emulator gone")

    metrics.derive("quarantined", broken)
    got = await prom.query(triage_text(policy, "quarantined", SICK), T0)
    assert isinstance(got, Failed) and got.why is Why.REJECTED and "emulator gone" in got.detail


def test_unknown_cells_and_figures_name_the_valid_ones(metrics: FleetMetrics):
    with pytest.raises(ValueError, match=r"eu-west-9.*us-east-1, us-east-2, us-east-3"):
        metrics.set("eu-west-9", "demand", 1)
    with pytest.raises(ValueError, match=r"'kv'.*ttft_p99, burn_fast"):
        metrics.value(SICK, "kv", T0)
    with pytest.raises(ValueError, match="'kv'"):
        metrics.derive("kv", lambda cell: 1.0)


# ------------------------------------------------------------------------------- refusals and protocol


async def test_an_expression_it_does_not_simulate_is_refused_with_its_reason(prom: Prometheus):
    got = await prom.query('sum(rate(http_requests_total{job="api"}[5m]))', T0)
    assert got == Failed(Why.REJECTED, NOT_SIMULATED, 422, "execution")
    assert "rejected the query (demo Prometheus: this expression is not one" in str(got)
    assert await prom.query_range("up", T0 - 60, T0, 15) == Failed(Why.REJECTED, NOT_SIMULATED, 422, "execution")


@pytest.mark.parametrize(
    ("path", "params", "error"),
    [
        ("/api/v1/query", {}, 'invalid parameter "query": 1:1: parse error: no expression found in input'),
        (
            "/api/v1/query",
            {"query": "up", "time": "noon"},
            'invalid parameter "time": Invalid time value for \'time\': cannot parse "noon" to a valid timestamp',
        ),
        (
            "/api/v1/query",
            {"query": "up", "timeout": "5x"},
            'invalid parameter "timeout": cannot parse "5x" to a valid duration',
        ),
        ("/api/v1/query_range", {"query": "up"}, 'invalid parameter "start": cannot parse "" to a valid timestamp'),
        (
            "/api/v1/query_range",
            {"query": "up", "start": "10", "end": "5", "step": "1"},
            'invalid parameter "end": end timestamp must not be before start time',
        ),
        (
            "/api/v1/query_range",
            {"query": "up", "start": "0", "end": "11001", "step": "1"},
            TOO_MANY_POINTS,
        ),
        (
            "/api/v1/query_range",
            {"query": "up", "start": "0", "end": "9", "step": "1q"},
            'invalid parameter "step": cannot parse "1q" to a valid duration',
        ),
    ],
)
async def test_bad_parameters_are_bad_data(demo: DemoPrometheus, path: str, params: dict, error: str):
    for method in ("GET", "POST"):
        assert await raw(demo.url, path, params, method) == (
            400,
            {"status": "error", "errorType": "bad_data", "error": error},
        )


async def test_the_clients_bad_request_is_rejected_with_prometheus_words(prom: Prometheus, policy):
    got = await prom.query_range(triage_text(policy, "kv_cache", SICK), T0, T0 - 60, 15)
    assert got == Failed(
        Why.REJECTED, 'invalid parameter "end": end timestamp must not be before start time', 400, "bad_data"
    )


async def test_post_form_answers_as_get_and_the_body_wins(demo: DemoPrometheus, metrics, policy):
    metrics.set(SICK, "preemptions", 2.5, at=T0 - 30)
    query = triage_text(policy, "preemptions", SICK)
    get = await raw(demo.url, "/api/v1/query", {"query": query, "time": str(T0)})
    post = await raw(demo.url, "/api/v1/query", {"query": query, "time": str(T0)}, "POST")
    assert (
        get
        == post
        == (
            200,
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {"cell": SICK}, "value": [T0, "2.5"]}]},
            },
        )
    )
    async with aiohttp.ClientSession() as session:
        url = f"{demo.url}/api/v1/query?time={T0 - 60}"
        async with session.post(url, data={"query": query, "time": str(T0)}) as resp:
            assert (await resp.json())["data"]["result"][0]["value"] == [T0, "2.5"]


async def test_times_and_steps_as_prometheus_reads_them(demo: DemoPrometheus, metrics, policy):
    metrics.set(SICK, "ecc_dbe", 2, at=T0 - 60)
    query = triage_text(policy, "ecc_dbe", SICK)
    start = datetime.fromtimestamp(T0 - 120, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = datetime.fromtimestamp(T0 + 30, UTC).strftime("%Y-%m-%dT%H:%M:%S.500+00:00")
    status, body = await raw(
        demo.url, "/api/v1/query_range", {"query": query, "start": start, "end": end, "step": "1m"}
    )
    assert status == 200
    assert body["data"]["result"][0]["values"] == [[T0 - 120, "0"], [T0 - 60, "2"], [T0, "2"]]
    status, body = await raw(demo.url, "/api/v1/query", {"query": query, "time": "1796008200.0004"})
    assert body["data"]["result"][0]["value"] == [T0, "2"]  # milliseconds, as Prometheus rounds


def test_values_and_timestamps_are_written_as_prometheus_writes_them():
    # What Prometheus 2.42 answered for vector(<v>) at these times.
    assert [format_value(v) for v in (40.0, 0.55, 1e-7, 1e-5, 1e16, 1e21, math.inf, -math.inf, math.nan)] == [
        "40", "0.55", "1e-07", "0.00001", "10000000000000000", "1e+21", "+Inf", "-Inf", "NaN",
    ]  # fmt: skip
    assert [format_timestamp(ms) for ms in (100_000, 100_500, 100_001, -5_500)] == [
        "100",
        "100.500",
        "100.001",
        "-5.500",
    ]


async def test_ready_healthy_and_buildinfo(demo: DemoPrometheus):
    async with aiohttp.ClientSession() as session:
        for path, text in (
            ("/-/ready", "Prometheus Server is Ready.\n"),
            ("/-/healthy", "Prometheus Server is Healthy.\n"),
        ):
            async with session.get(demo.url + path) as resp:
                assert (resp.status, await resp.text()) == (200, text)
        async with session.get(demo.url + "/api/v1/status/buildinfo") as resp:
            body = await resp.json()
    assert body["status"] == "success" and body["data"]["revision"] == "firebreak-demo"


async def test_stopped_it_is_unreachable(metrics, policy):
    server = DemoPrometheus(metrics, policy)
    url = await server.start()
    await server.stop()
    got = await Prometheus(url, timeout=2).query(triage_text(policy, "kv_cache", SICK), T0)
    assert isinstance(got, Failed) and got.why is Why.UNREACHABLE


# ------------------------------------------------------------------------------- against a real Prometheus

REAL_CELLS = (SICK, "us-east-1")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A real Prometheus with the exporters' series for two healthy cells, 75 minutes to T0."""
    ensure_services_installed()
    start = T0 - 75 * 60
    sc = ttft_scenario(dict.fromkeys(REAL_CELLS, 0.001), start_ts=start, minutes=75, triage=True)
    for cell in REAL_CELLS:
        sc.series += health_series(cell, CellHealth(), start, 75)
    sc.series += demand_series(dict.fromkeys(REAL_CELLS, (40.0, 40.0)), change_ts=T0, start_ts=start, minutes=75)
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), sc))


def policy_texts(policy: Policy) -> list[str]:
    texts = [triage_text(policy, q.name, cell) for q in policy.queries.queries for cell in REAL_CELLS]
    per_cell = [(headroom_text(policy, c), rate_text(policy, c), trigger_query(c)) for c in REAL_CELLS]
    return [*texts, *(t for three in per_cell for t in three), policy.queries.changed.demand.query]


async def test_each_answer_has_the_label_set_a_real_prometheus_gives(real, demo, prom: Prometheus, policy: Policy):
    real_prom = Prometheus(real.url)
    for cell in REAL_CELLS:  # as the demo fleet registers its ScaledObjects' triggers
        demo.register(trigger_query(cell), cell, "waiting", by_cell=False)
    for text in policy_texts(policy):
        want, got = await real_prom.query(text, T0), await prom.query(text, T0)
        assert isinstance(want, Vector) and want.samples, (text, want)
        assert isinstance(got, Vector), (text, got)
        # The demo fleet has a third cell the real one lacks: compare the real one's cells (an
        # unlabelled answer is of the one cell its text names).
        got_labels = [dict(s.labels) for s in got.samples if s.labels.get("cell", REAL_CELLS[0]) in REAL_CELLS]
        assert got_labels == sorted((dict(s.labels) for s in want.samples), key=lambda d: d.get("cell", "")), text


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/query", {}),
        ("/api/v1/query", {"query": "  \n"}),
        ("/api/v1/query", {"query": "up", "time": "2026-13-01T00:00:00Z"}),
        ("/api/v1/query", {"query": "up", "time": "abc", "timeout": "zz"}),
        ("/api/v1/query", {"query": "up", "time": "1_"}),
        ("/api/v1/query", {"query": "up", "time": "1e400"}),
        ("/api/v1/query", {"query": "up", "timeout": "1h5"}),
        ("/api/v1/query_range", {"start": "0", "end": "10", "step": "1"}),
        ("/api/v1/query_range", {"query": "up", "start": "x", "end": "y", "step": "z"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "y"}),
        ("/api/v1/query_range", {"query": "up", "start": "10", "end": "5", "step": "1"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "10"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "10", "step": "0"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "10", "step": "-1m"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "11001", "step": "1"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "1100.1", "step": "0.1"}),
        ("/api/v1/query_range", {"query": "up", "start": "0", "end": "10", "step": "1", "timeout": "x"}),
    ],
)
async def test_bad_requests_are_answered_as_a_real_prometheus_answers_them(real, demo, path, params):
    assert await raw(demo.url, path, params) == await raw(real.url, path, params)


async def test_an_unlabelled_expression_is_one_series_whichever_cell_registered_it_last(prom, demo):
    text = 'sum(vllm:num_requests_waiting{model_name="llm-70b"})'  # no cell: one series for the fleet
    demo.register(text, SICK, "waiting", by_cell=False)
    demo.register(text, "us-east-1", "waiting", by_cell=False)
    got = await prom.query(text, T0)
    assert isinstance(got, Vector) and [dict(s.labels) for s in got.samples] == [{}]
