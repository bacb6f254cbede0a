"""The Prometheus integration counts what it could not get answered (firebreak_prometheus_query_errors_total),
as Slack's and Kubernetes' integrations count their error answers."""

from __future__ import annotations

from bot import metrics
from bot.config import PrometheusSettings
from bot.prom import Failed, Why
from bot.runtime import prometheus
from tests.support.ports import free_port


def counted(endpoint: str, why: str) -> float:
    return (
        metrics.REGISTRY.get_sample_value("firebreak_prometheus_query_errors_total", {"endpoint": endpoint, "why": why})
        or 0.0
    )


async def test_an_unreachable_prometheus_is_counted_by_endpoint_and_why():
    client = prometheus(PrometheusSettings(prometheus_url=f"http://127.0.0.1:{free_port()}"))
    assert client is not None
    before = counted("query", "unreachable"), counted("query_range", "unreachable")
    try:
        got = await client.query("up", at=1_700_000_000, timeout=2)
        ranged = await client.query_range("up", 1_700_000_000, 1_700_000_060, 15, timeout=2)
    finally:
        await client.close()
    assert isinstance(got, Failed) and got.why is Why.UNREACHABLE
    assert isinstance(ranged, Failed) and ranged.why is Why.UNREACHABLE
    assert (counted("query", "unreachable"), counted("query_range", "unreachable")) == (before[0] + 1, before[1] + 1)
