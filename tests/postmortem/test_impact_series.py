"""Impact start takes only the series of the alert itself (issue 25): an alert's expression often
returns one series per GPU or node, and the alert is one of them. A real Prometheus, backfilled
(promtool) with dcgm-exporter's DCGM_FI_DEV_XID_ERRORS for two GPUs of us-east-1, is asked
through the app's own client (bot.prom.connect)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import pytest

from bot.incidents.models import AlertRecord
from bot.postmortem.impact import Found, earliest, evaluate
from bot.prom.connect import Prometheus
from tests.support.harness import T0
from tests.support.prometheus import (
    DCGM_DRIVER_VERSION,
    DCGM_MODEL_NAME,
    XID_TEXT,
    PrometheusServer,
    Series,
    ensure_services_installed,
)
from tests.support.triage import serve

CELL = "us-east-1"
HOUR = 3600.0
# One series per GPU, as the xid-storm drill's rule writes it.
EXPR = f'max by (cell, Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS{{cell="{CELL}"}}) == 79'
URL = f"http://prometheus.{CELL}:9090/graph?g0.expr={quote(EXPR, safe='')}&g0.tab=1"
EARLY = T0 - 4 * HOUR  # GPU 0 of host a fell off the bus then (its alert went to another incident)
LATE = T0 - HOUR  # GPU 0 of host b fell off the bus then


def _gpu(host: str, since: float, start: float, end: float) -> list[Series]:
    """dcgm-exporter's gauge for one GPU: 0, then 79 from ``since`` (a new XID is a new series)."""
    ts = [start + i * 60 for i in range(int((end - start) // 60) + 1)]
    labels = {
        "cell": CELL,
        "gpu": "0",
        "UUID": f"GPU-{host}",
        "pci_bus_id": "00000000:18:00.0",
        "device": "nvidia0",
        "modelName": DCGM_MODEL_NAME,
        "Hostname": host,
        "DCGM_FI_DRIVER_VERSION": DCGM_DRIVER_VERSION,
    }
    return [
        Series(
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            {**labels, "err_code": str(v), "err_msg": XID_TEXT[v]},
            [(t, float(v)) for t in ts if (t >= since) == (v == 79)],
        )
        for v in (0, 79)
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    ensure_services_installed()
    start, end = T0 - 30 * HOUR, T0 + HOUR
    series = _gpu("gpu-a", EARLY, start, end) + _gpu("gpu-b", LATE, start, end)
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), series))


@pytest.fixture
async def prom(server: PrometheusServer) -> AsyncIterator[Prometheus]:
    client = Prometheus(server.url)
    yield client
    await client.close()


def _alert(host: str, starts_at: str, fp: str) -> AlertRecord:
    """The alert Prometheus made from the host's series: its labels, the rule's and an external one."""
    labels = {
        "alertname": "GPUXid79",
        "severity": "page",
        "cell": CELL,
        "Hostname": host,
        "gpu": "0",
        "prometheus_replica": "prometheus-0",
    }
    return AlertRecord(
        fingerprint=fp,
        status="firing",
        alertname="GPUXid79",
        labels=labels,
        starts_at=starts_at,
        generator_url=URL,
        received_at=T0,
    )


B_STARTS = "2026-11-30T02:12:00Z"  # LATE (02:10) plus the rule's `for: 2m`
A_STARTS = "2026-11-29T23:12:00Z"  # EARLY (23:10) plus 2 minutes


async def test_the_run_is_the_alerts_own_series_not_another_gpus(prom: Prometheus) -> None:
    # Only host b's alert is in this incident. Host a's series has been true since 23:10 and
    # still is: merged with b's, "any series" would date b's condition from 23:10.
    [ev] = await evaluate(prom, [_alert("gpu-b", B_STARTS, "b")], timeout=10)
    assert ev.found is Found.run, ev
    assert ev.run_start == LATE, (ev.run_start, LATE)
    assert ev.sentence().endswith("true since 02:10 without a break to its startsAt 02:12")
    assert earliest([ev], declared=T0).at == LATE


async def test_alerts_sharing_an_expression_each_use_their_own_series(prom: Prometheus) -> None:
    # Both alerts: one evaluation, each judged on its own series up to its own startsAt; the
    # earliest of their runs is host a's.
    [ev] = await evaluate(prom, [_alert("gpu-b", B_STARTS, "b"), _alert("gpu-a", A_STARTS, "a")], timeout=10)
    assert (ev.found, ev.alerts, ev.run_start) == (Found.run, 2, EARLY)
    assert ev.sentence().endswith("true since 23:10 without a break to its startsAt 23:12")


async def test_an_alert_whose_labels_match_no_series_finds_no_run(prom: Prometheus) -> None:
    [ev] = await evaluate(prom, [_alert("gpu-c", B_STARTS, "c")], timeout=10)
    assert ev.found is Found.no_series and ev.first_true is None
