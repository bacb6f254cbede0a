"""Impact start takes only the series of the alert itself (issue 25): an alert's expression often
returns one series per GPU or node, and the alert is one of them. A real Prometheus, backfilled
(promtool) with dcgm-exporter's DCGM_FI_DEV_XID_ERRORS for two GPUs of us-east-1, is asked
through the app's own client (bot.prom.connect); once with the exporter's host label spelled
`Hostname` (its releases), once `hostname` (its main branch since d5e5f51)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import pytest

from bot.postmortem.impact import Found, earliest, evaluate
from bot.prom.connect import Prometheus
from bot.signals.models import AlertRecord
from fbworld.dcgm import XID_ERRORS
from tests.support.harness import T0
from tests.support.prometheus import (
    HOSTNAME_LABELS,
    Exporter,
    Gpu,
    PrometheusServer,
    Series,
    dcgm_backfill,
    ensure_services_installed,
)
from tests.support.triage import serve

CELL = "us-east-1"
HOUR = 3600.0
# One series per GPU, as the xid-storm drill's rule writes it (by either spelling of the host label).
EXPR = f'max by (cell, Hostname, hostname, gpu) (DCGM_FI_DEV_XID_ERRORS{{cell="{CELL}"}}) == 79'
URL = f"http://prometheus.{CELL}:9090/graph?g0.expr={quote(EXPR, safe='')}&g0.tab=1"
EARLY = T0 - 4 * HOUR  # GPU 0 of host a fell off the bus then (its alert went to another incident)
LATE = T0 - HOUR  # GPU 0 of host b fell off the bus then


def _gpu(host: str, since: float, start: float, end: float, exporter: Exporter) -> list[Series]:
    """dcgm-exporter's XID gauge for one GPU, scraped every minute: 0, then XID 79 at ``since``,
    held from then on (a new XID is a new series)."""
    ts = [start + i * 60 for i in range(int((end - start) // 60) + 1)]
    return dcgm_backfill(exporter, [Gpu(host, 0, target={"cell": CELL}).xid(since, 79)], ts, [XID_ERRORS])


@pytest.fixture(scope="module", params=HOSTNAME_LABELS)
def host_label(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, host_label: str) -> Iterator[PrometheusServer]:
    ensure_services_installed()
    start, end = T0 - 30 * HOUR, T0 + HOUR
    exporter = Exporter(hostname_label=host_label)
    series = _gpu("gpu-a", EARLY, start, end, exporter) + _gpu("gpu-b", LATE, start, end, exporter)
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), series))


@pytest.fixture
async def prom(server: PrometheusServer) -> AsyncIterator[Prometheus]:
    client = Prometheus(server.url)
    yield client
    await client.close()


def _alert(host: str, starts_at: str, fp: str, host_label: str) -> AlertRecord:
    """The alert Prometheus made from the host's series: its labels, the rule's and an external one."""
    labels = {
        "alertname": "GPUXid79",
        "severity": "page",
        "cell": CELL,
        host_label: host,
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


async def test_the_run_is_the_alerts_own_series_not_another_gpus(prom: Prometheus, host_label: str) -> None:
    # Only host b's alert is in this incident. Host a's series has been true since 23:10 and
    # still is: merged with b's, "any series" would date b's condition from 23:10.
    [ev] = await evaluate(prom, [_alert("gpu-b", B_STARTS, "b", host_label)], timeout=10)
    assert ev.found is Found.run, ev
    assert ev.run_start == LATE, (ev.run_start, LATE)
    assert ev.sentence().endswith("true since 02:10 without a break to its startsAt 02:12")
    assert earliest([ev], declared=T0).at == LATE


async def test_alerts_sharing_an_expression_each_use_their_own_series(prom: Prometheus, host_label: str) -> None:
    # Both alerts: one evaluation, each judged on its own series up to its own startsAt; the
    # earliest of their runs is host a's.
    [ev] = await evaluate(
        prom, [_alert("gpu-b", B_STARTS, "b", host_label), _alert("gpu-a", A_STARTS, "a", host_label)], timeout=10
    )
    assert (ev.found, ev.alerts, ev.run_start) == (Found.run, 2, EARLY)
    assert ev.sentence().endswith("true since 23:10 without a break to its startsAt 23:12")


async def test_an_alert_whose_labels_match_no_series_finds_no_run(prom: Prometheus, host_label: str) -> None:
    [ev] = await evaluate(prom, [_alert("gpu-c", B_STARTS, "c", host_label)], timeout=10)
    assert ev.found is Found.no_series and ev.first_true is None
