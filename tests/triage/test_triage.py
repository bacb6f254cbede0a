"""`/incident triage` against a real Prometheus backfilled (promtool) with exporter-shaped series in
which us-east-3 degrades: the posted table shows its numbers, the healthy cell's, a blind cell's
`no data`, and a broken query's `failed`, never 0. The two cells' dcgm-exporters spell the host
label differently (`hostname` as on its main branch, `Hostname` as in its releases): the DCGM rows
read both."""

from __future__ import annotations

import json
import socket
import time

import pytest

from bot.policy import load_policy
from bot.triage import rules
from tests.support.harness import T0, start_app
from tests.support.levers import kubectl
from tests.support.ports import free_port
from tests.support.prometheus import (
    CellHealth,
    CellTriage,
    Exporter,
    PrometheusServer,
    ensure_services_installed,
    health_series,
    ttft_scenario,
)
from tests.support.triage import (
    DEGRADED,
    HEALTHY,
    SHIPPED,
    block_texts,
    gpu_nodes,
    notes_of,
    policy_dir,
    posted,
    say,
    serve,
    table_of,
)

BLIND = "eu-west-9"  # in the incident, but no exporter of it is scraped
START, MINUTES = T0 - 7200, 240  # history from two hours before T0 to two hours after
GPU_NODES = [f"gpu-{DEGRADED}-{i}" for i in range(10)]
# The XIDs the degraded cell's GPUs reported (minute 120 is T0; the rows look at the hour before
# it). DCGM_FI_DEV_XID_ERRORS holds the last one until the driver reloads.
XID_HISTORY = {
    GPU_NODES[0]: [(100, 79)],  # fell off the bus 20 minutes ago: fatal
    GPU_NODES[1]: [(0, 13)],  # an application's XID two hours ago, still held: neither
    GPU_NODES[2]: [(0, 79)],  # fatal, but two hours ago (quarantine's business now): neither
    GPU_NODES[3]: [(110, 13)],  # an application's XID 10 minutes ago: application
    GPU_NODES[4]: [(0, 13), (105, 48)],  # an old application XID, then a double-bit ECC: fatal
}
# The degraded cell's exporter runs dcgm-exporter's main branch, the healthy one's a release.
MAIN, RELEASE = Exporter(hostname_label="hostname"), Exporter(hostname_label="Hostname")


@pytest.fixture(scope="module")
def scenario():
    triage = {
        DEGRADED: CellTriage(
            kv_cache_usage=0.97,
            preemptions_per_min=60,  # per pod: 2/s for the cell's two pods
            hosts=GPU_NODES[:5],
            xid_history=XID_HISTORY,
            pending_workloads=12,
            inadmissible_workloads=5,  # pending too: Kueue counts them apart (status="inadmissible")
            quarantined_nodes=GPU_NODES[:2],
            gpu_nodes=GPU_NODES,
            exporter=MAIN,
        ),
        HEALTHY: CellTriage(exporter=RELEASE),
    }
    sc = ttft_scenario({DEGRADED: 0.2, HEALTHY: 0.001}, start_ts=START, minutes=MINUTES, triage=triage)
    sick = CellHealth(
        waiting_per_pod=24,
        ecc_dbe={f"gpu-{DEGRADED}-0": 2},
        ecc_dbe_minute=100,
        row_remap_pending=[f"gpu-{DEGRADED}-0"],
        exporter=MAIN,
    )
    sc.series += health_series(DEGRADED, sick, START, MINUTES)
    sc.series += health_series(HEALTHY, CellHealth(exporter=RELEASE), START, MINUTES)
    return sc


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, scenario):
    ensure_services_installed()
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), scenario))


@pytest.fixture
def app_settings(request, prometheus, tmp_path) -> dict:
    """The shipped policy; `request.param` adds queries to queries.yaml. oncall.yaml names BLIND, so it
    is a cell Firebreak knows (`declare --cell` takes known cells only) though no kube context has it."""
    pol = policy_dir(tmp_path, getattr(request, "param", None))
    (pol / "oncall.yaml").write_text(json.dumps({"default": None, "cells": {BLIND: None}}) + "\n")
    return {"prometheus_url": prometheus.url, "firebreak_policy_dir": str(pol)}


async def triage(app, cells=(DEGRADED, HEALTHY, BLIND)):
    inc = await app.declare(cells=cells)
    out = await say(app, "triage", "U_ANYONE", inc.channel_id)
    return inc, out, posted(app, inc.channel_id, f"Triage for {inc.id}")


async def test_the_degraded_cell_shows_its_numbers(app, prometheus):
    inc, out, msg = await triage(app)
    table = table_of(msg)
    assert out == f"Triage for {inc.id} posted in the channel: 12 queries × 3 cells (12 no data).", out
    assert list(table) == [q.title for q in load_policy(SHIPPED).queries.queries]
    expected = {
        "SLO burn 1h (fast)": ("20.0x", "0.100x"),
        "SLO burn 6h (slow)": ("20.0x", "0.100x"),
        "KV cache (max pod)": ("97.0%", "35.0%"),
        "Preemptions": ("2.00/s", "0/s"),
        "Waiting / running": ("3.00", "0"),
        # By class, and only what changed in the hour: not every GPU whose gauge is not 0 (5).
        "GPUs, fatal XID 1h": ("2", "0"),
        "GPUs, app XID 1h": ("1", "0"),
        "ECC DBE errors 1h": ("2", "0"),
        "Row remap pending": ("1", "0"),
        "Quarantined GPU nodes": ("20.0%", "0%"),
        "Kueue pending": ("17", "0"),
    }
    for title, (sick, fine) in expected.items():
        assert table[title] == {DEGRADED: sick, HEALTHY: fine, BLIND: "no data"}, (title, table[title])

    # TTFT p99: what Prometheus itself says for the shipped query, above the 2.5 s bucket when degraded.
    q = next(q for q in load_policy(SHIPPED).queries.queries if q.name == "ttft_p99")
    for cell in (DEGRADED, HEALTHY):
        (row,) = await prometheus.query(q.query.replace("$cell", cell), at=T0)
        value = float(row["value"][1])
        assert table["TTFT p99"][cell] == rules.show(rules.Figure(rules.State.ok, value, 1), q.unit)
        assert (value > 2.5) is (cell == DEGRADED), (cell, value)
    assert table["TTFT p99"][BLIND] == "no data"

    notes = notes_of(msg)
    assert "`no data` (no series matched" in notes and BLIND in notes
    assert "failed" not in notes


@pytest.mark.parametrize(
    "app_settings",
    [
        [
            {
                "name": "broken",
                "title": "Broken query",
                "unit": "count",
                "query": 'rate(vllm:num_requests_running{cell="$cell"}',
            },
            {
                "name": "empty",
                "title": "Empty query",
                "unit": "count",
                "query": 'sum by (cell) (vllm:no_such_series{cell="$cell"})',
            },
            {
                "name": "range",
                "title": "Range query",
                "unit": "count",
                "query": 'vllm:num_requests_running{cell="$cell"}[5m]',
            },
        ]
    ],
    indirect=True,
    ids=["policy-with-bad-queries"],
)
async def test_a_broken_query_shows_failed_and_an_empty_one_no_data(app):
    inc, out, msg = await triage(app, cells=(DEGRADED, HEALTHY))
    assert out == f"Triage for {inc.id} posted in the channel: 15 queries × 2 cells (4 failed, 2 no data).", out
    table = table_of(msg)
    assert table["Broken query"] == {DEGRADED: "failed", HEALTHY: "failed"}
    assert table["Empty query"] == {DEGRADED: "no data", HEALTHY: "no data"}
    assert table["Range query"] == {DEGRADED: "failed", HEALTHY: "failed"}
    assert table["Kueue pending"] == {DEGRADED: "17", HEALTHY: "0"}  # the others still answer
    notes = notes_of(msg)
    # Prometheus's own words for the parse error, once for both cells.
    assert "`failed`: Broken query (us-east-3, us-east-1): Prometheus rejected the query (" in notes
    assert "parse error" in notes
    assert "`failed`: Range query (us-east-3, us-east-1): the query returns a range vector" in notes
    assert "Empty query (us-east-3, us-east-1)" in notes


@pytest.mark.parametrize(
    "app_settings", [{"prometheus_url": f"http://127.0.0.1:{free_port()}"}], ids=["nothing-listening"]
)
async def test_prometheus_down_fails_every_query_by_name(app):
    inc, out, msg = await triage(app, cells=(DEGRADED,))
    assert out == f"Triage for {inc.id} posted in the channel: 12 queries × 1 cell (12 failed).", out
    assert set(table_of(msg)["TTFT p99"].values()) == {"failed"}
    assert all(v == {DEGRADED: "failed"} for v in table_of(msg).values())
    assert "`failed`: every query: Prometheus can't be reached (ConnectionError)" in notes_of(msg)


@pytest.fixture
def silent_prometheus(tmp_path):
    """A port that takes connections and never answers (a hung Prometheus), and a policy whose
    queries give up after half a second."""
    sock = socket.create_server(("127.0.0.1", 0), backlog=128)
    yield {
        "prometheus_url": f"http://127.0.0.1:{sock.getsockname()[1]}",
        "firebreak_policy_dir": str(policy_dir(tmp_path, timeout_seconds=0.5)),
    }
    sock.close()


async def test_a_hung_prometheus_fails_every_query_in_time(slack, redis_url, clock, cells, silent_prometheus):
    app = await start_app(slack, redis_url, clock, kubeconfig=str(cells.kubeconfig), **silent_prometheus)
    try:
        started = time.monotonic()
        inc, out, msg = await triage(app, cells=(DEGRADED, HEALTHY))
        assert out == f"Triage for {inc.id} posted in the channel: 12 queries × 2 cells (24 failed).", out
        # Bounded, not timed: with no query timeout the triage would hang on the silent port for good.
        # (Two waves of half a second when the machine is idle; the bound leaves room for a loaded one.)
        assert time.monotonic() - started < 30
        assert "`failed`: every query: Prometheus did not answer in time (" in notes_of(msg)
    finally:
        await app.stop()


@pytest.mark.parametrize("app_settings", [{}], ids=["no-prometheus"])
async def test_without_prometheus_triage_says_so(app):
    inc = await app.declare(cells=(DEGRADED,))
    out = await say(app, "triage", "U_ANYONE", inc.channel_id)
    assert out == "Triage needs Prometheus and PROMETHEUS_URL is not set; nothing was queried.", out
    assert not [m for m in app.slack.messages(inc.channel_id) if "Triage for" in str(m.get("text"))]


async def test_an_incident_without_cells_is_told_how_to_name_them(app):
    inc = await app.declare(cells=())
    out = await say(app, "triage", "U_ANYONE", inc.channel_id)
    assert out.startswith(f"{inc.id} names no cells, and triage asks Prometheus per cell."), out


async def test_anyone_in_the_channel_may_run_it_and_it_is_audited(app):
    inc, out, _ = await triage(app, cells=(DEGRADED,))
    assert "posted in the channel" in out
    entries = [e async for e in app.services.audit.entries(inc.id)]
    (entry,) = [e for e in entries if e["action"] == "command.triage"]
    assert entry["actor"] == "U_ANYONE" and entry["detail"]["result"] == "ok"
    assert entry["detail"]["cells"] == [DEGRADED] and entry["detail"]["queries"] == 12


async def test_triage_says_who_took_gpu_nodes_out(app, cells):
    """Besides Prometheus's table, the cluster says who fenced each cell's GPU nodes: a NodeHealthCheck's
    Self Node Remediation, a kubectl cordon (every cordon and fence counts, not only Firebreak's)."""
    names = gpu_nodes(cells.degraded, DEGRADED, n=4)
    gpu_nodes(cells.healthy, HEALTHY, n=2)
    for n in names[:2]:
        taint = "remediation.medik8s.io/self-node-remediation:NoSchedule"
        await kubectl(cells.kubeconfig, DEGRADED, "taint", "nodes", n, taint, "--field-manager=manager")
    await kubectl(cells.kubeconfig, DEGRADED, "cordon", names[2])
    _, _, msg = await triage(app)
    texts = "\n".join(block_texts(msg))
    assert "*GPU nodes out of service, by who*" in texts, texts
    assert (
        f"{DEGRADED}: 3 of 4 GPU nodes can't take work: NodeHealthCheck (medik8s) 2 ({names[0]}, {names[1]}); "
        f"kubectl 1 ({names[2]})" in texts
    ), texts
    assert f"{HEALTHY}: all 2 GPU nodes can take work" in texts and f"{BLIND}: no kube context" in texts, texts
