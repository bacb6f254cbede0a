"""Checks for tests/support: backfilled Prometheus and a real Alertmanager."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
import requests
from prometheus_api_client import PrometheusConnect

from tests.support.alertmanager import AlertmanagerServer, WebhookReceiver, alert
from tests.support.prometheus import (
    BURN_RATE_QUERY,
    TTFT_METRIC,
    CellTriage,
    PrometheusServer,
    Series,
    burn_rate_query,
    ensure_services_installed,
    make_tls,
    render_openmetrics,
    ttft_scenario,
)

START_TS = 1_700_000_000  # fixed history: 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def services_installed():
    ensure_services_installed()  # runs .ci/install-services.sh only if binaries are missing


def test_openmetrics_text_rules():
    text = render_openmetrics(
        [
            Series("reqs_total", "counter", {"b": "2", "a": "x"}, [(20, 2), (10, 1)]),
            Series("temp", "gauge", {}, [(10, 1.5)]),
            Series("lat_bucket", "histogram", {"le": math.inf}, [(10, 3)]),
            Series("lat_bucket", "histogram", {"le": 2.5}, [(10, 2)]),
            Series("lat_count", "histogram", {}, [(10, 3)]),
            Series("lat_sum", "histogram", {}, [(10, 4.5)]),
        ]
    )
    lines = text.splitlines()
    assert lines[0] == "# TYPE reqs counter"
    assert lines[1:3] == ['reqs_total{a="x",b="2"} 1 10', 'reqs_total{a="x",b="2"} 2 20']
    assert "# TYPE lat histogram" in lines
    i = lines.index("# TYPE lat histogram")
    assert lines[i + 1 : i + 5] == [
        'lat_bucket{le="2.5"} 2 10',
        'lat_bucket{le="+Inf"} 3 10',
        "lat_count 3 10",
        "lat_sum 4.5 10",
    ]
    assert lines[-1] == "# EOF" and text.endswith("# EOF\n")
    assert "" not in lines and ", " not in text


def test_openmetrics_rejects_bad_input():
    with pytest.raises(ValueError, match="milliseconds"):
        render_openmetrics([Series("g", "gauge", {}, [(1_700_000_000_000, 1)])])
    with pytest.raises(ValueError, match="duplicate"):
        render_openmetrics([Series("g", "gauge", {}, [(1, 1), (1, 2)])])
    with pytest.raises(ValueError, match="Inf"):
        render_openmetrics([Series("h_bucket", "histogram", {"le": 1.0}, [(1, 1)])])


# vLLM's TTFT boundaries as its /metrics page shows them (prometheus_client's rendering of
# vllm/v1/metrics/loggers.py's list), written out here so a change to the support module shows.
VLLM_TTFT_LE = (
    "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0",
    "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf",
)  # fmt: skip


def test_ttft_scenario_uses_vllm_buckets_and_refuses_invented_ones():
    sc = ttft_scenario({"a": 0.01}, START_TS, minutes=2)
    les = {s.labels["le"] for s in sc.series if s.name == f"{TTFT_METRIC}_bucket"}
    text = render_openmetrics(sc.series)
    assert {line.split('le="')[1].split('"')[0] for line in text.splitlines() if 'le="' in line} == set(VLLM_TTFT_LE)
    assert len(les) == len(VLLM_TTFT_LE)
    assert sc.threshold == 2.5 and 'le="2.5"' in sc.query and 'le="2.5"' in BURN_RATE_QUERY
    for bad in (2.0, 3.0, math.inf):
        with pytest.raises(ValueError, match="not a bucket boundary vLLM publishes"):
            ttft_scenario({"a": 0.01}, START_TS, threshold=bad)
        with pytest.raises(ValueError, match="not a bucket boundary vLLM publishes"):
            burn_rate_query(bad)
    with pytest.raises(ValueError, match=r"the nearest at or above is 2\.5"):
        ttft_scenario({"a": 0.01}, START_TS, threshold=2.0)
    assert 'le="5.0"' in ttft_scenario({"a": 0.01}, START_TS, minutes=2, threshold=5.0).query


@pytest.mark.asyncio
async def test_backfilled_prometheus_answers_burn_rate(tmp_path, services_installed):
    cells = {"healthy": 0.001, "warm": 0.05, "burning": 0.2}
    sc = ttft_scenario(
        cells,
        START_TS,
        minutes=120,
        triage={
            "burning": CellTriage(
                kv_cache_usage=0.97,
                preemptions_per_min=6,
                xid=79,
                quarantined_nodes=["gpu-burning-0"],
                pending_workloads=12,
            )
        },
    )
    async with PrometheusServer(tmp_path, sc) as prom:
        pc = PrometheusConnect(prom.url)
        rows = await asyncio.to_thread(pc.custom_query, BURN_RATE_QUERY, params={"time": sc.end_ts})
        got = {r["metric"]["cell"]: float(r["value"][1]) for r in rows}
        assert set(got) == set(cells)
        assert got["healthy"] == pytest.approx(0.1, rel=0.05)
        assert got["warm"] == pytest.approx(5.0, rel=0.05)
        assert got["burning"] == pytest.approx(20.0, rel=0.05)
        for cell, expected in sc.expected_burn.items():
            assert got[cell] == pytest.approx(expected, rel=0.05)

        # Triage signals are there at the same evaluation time.
        def q(expr):
            return pc.custom_query(expr, params={"time": sc.end_ts})

        # vLLM's own labels on its series; cell and pod are the scrape's target labels.
        ttft = await asyncio.to_thread(q, f'count by (le) ({TTFT_METRIC}_bucket{{cell="warm"}})')
        assert sorted(r["metric"]["le"] for r in ttft) == sorted(VLLM_TTFT_LE)
        assert {float(r["value"][1]) for r in ttft} == {2}  # one series per pod
        labels = await asyncio.to_thread(q, f"group by (cell, pod, model_name, engine) ({TTFT_METRIC}_count)")
        assert {(r["metric"]["cell"], r["metric"]["pod"], r["metric"]["engine"]) for r in labels} == {
            (c, p, "0") for c in cells for p in ("vllm-0", "vllm-1")
        }

        kv = await asyncio.to_thread(q, 'max by (cell) (vllm:kv_cache_usage_perc{cell="burning"})')
        assert float(kv[0]["value"][1]) == pytest.approx(0.97)
        pre = await asyncio.to_thread(q, 'sum(rate(vllm:num_preemptions_total{cell="burning"}[10m]))')
        assert float(pre[0]["value"][1]) == pytest.approx(2 * 6 / 60, rel=0.05)
        xid = await asyncio.to_thread(q, "DCGM_FI_DEV_XID_ERRORS > 0")
        assert [r["metric"]["Hostname"] for r in xid] == ["gpu-burning-0"]
        assert xid[0]["metric"]["err_code"] == "79" and xid[0]["metric"]["err_msg"] == "GPU has fallen off the bus"
        assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "DCGM_FI_DRIVER_VERSION"} <= set(xid[0]["metric"])
        taint = await asyncio.to_thread(q, 'kube_node_spec_taint{key="gpu.corp/quarantine"}')
        assert [r["metric"]["node"] for r in taint] == ["gpu-burning-0"]
        gpu = await asyncio.to_thread(q, 'kube_node_labels{label_nvidia_com_gpu_present="true"}')
        assert len(gpu) == 2
        kueue = await asyncio.to_thread(q, 'kueue_pending_workloads{status="active"}')
        assert float(kueue[0]["value"][1]) == 12
        assert kueue[0]["metric"]["cluster_queue"] == "research-h100" and kueue[0]["metric"]["replica_role"] == "leader"

        # The pitfall: without an explicit time (i.e. "now") the history is invisible.
        assert await asyncio.to_thread(pc.custom_query, BURN_RATE_QUERY) == []


@pytest.mark.asyncio
async def test_prometheus_over_https_with_a_throwaway_ca(tmp_path, services_installed):
    tls = await asyncio.to_thread(make_tls, tmp_path / "tls")
    sc = ttft_scenario({"a": 0.001}, START_TS, minutes=70)
    async with PrometheusServer(tmp_path / "prom", sc, tls=tls) as prom:
        assert prom.url.startswith("https://127.0.0.1:")
        rows = await prom.query(sc.query)  # trusts tls.ca_file
        assert float(rows[0]["value"][1]) == pytest.approx(0.1, rel=0.05)
        # Without the CA the certificate is not trusted; plain http to the TLS port is answered 400.
        with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.to_thread(requests.get, f"{prom.url}/-/ready", timeout=5)
        resp = await asyncio.to_thread(requests.get, prom.url.replace("https", "http") + "/-/ready", timeout=5)
        assert resp.status_code == 400


@pytest.mark.asyncio
async def test_alertmanager_delivers_v4_webhook_grouped_by_cell(tmp_path, services_installed):
    token = "test-token-123"
    async with WebhookReceiver(token=token) as hook, AlertmanagerServer(tmp_path, hook.url, token) as am:
        alerts = [
            alert("TTFTBurnRateHigh", cell="a", labels={"severity": "page"}, annotations={"summary": "burn 20x"}),
            alert("KVCacheSaturated", cell="a", labels={"severity": "page"}),
            alert("TTFTBurnRateHigh", cell="b", labels={"severity": "page"}),
        ]
        t0 = time.monotonic()
        await am.post_alerts(alerts)
        d = await hook.wait_for(lambda d: d.payload["groupLabels"] == {"cell": "a"}, timeout=10)
        assert d.received_at - t0 < 5
        p = d.payload
        assert p["version"] == "4"
        assert p["status"] == "firing"
        assert d.headers["Authorization"] == f"Bearer {token}"
        assert sorted(a["labels"]["alertname"] for a in p["alerts"]) == ["KVCacheSaturated", "TTFTBurnRateHigh"]
        assert all(a["status"] == "firing" for a in p["alerts"])
        assert p["commonLabels"] == {"cell": "a", "severity": "page"}
        for key in ("receiver", "commonAnnotations", "externalURL", "groupKey"):
            assert key in p
        db = await hook.wait_for(lambda d: d.payload["groupLabels"] == {"cell": "b"}, timeout=10)
        assert [a["labels"]["alertname"] for a in db.payload["alerts"]] == ["TTFTBurnRateHigh"]
        assert hook.rejected == []

        # send_resolved: resolving the cell-a alerts produces a "resolved" payload.
        await am.resolve_alerts(alerts[:2])
        r = await hook.wait_for(
            lambda d: d.payload["status"] == "resolved" and d.payload["groupLabels"] == {"cell": "a"}, timeout=10
        )
        assert len(r.payload["alerts"]) == 2
