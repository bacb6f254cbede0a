"""bot/prom/connect.py, the app's Prometheus client on prometheus-api-client, against a real
Prometheus (plain and HTTPS): every kind of answer typed, so "failed" and "no data" are never
confused; and against answers that are not Prometheus's (a proxy's error page)."""

from __future__ import annotations

import asyncio

import pytest

from bot.prom import Failed, Matrix, Scalar, Text, Vector, Why
from bot.prom.connect import Prometheus
from tests.support.harness import T0
from tests.support.ports import free_port
from tests.support.prometheus import (
    CellHealth,
    PrometheusServer,
    answering,
    ensure_services_installed,
    health_series,
    make_tls,
)
from tests.support.triage import serve

START = T0 - 3600
SERIES = health_series("us-east-3", CellHealth(running_per_pod=8, waiting_per_pod=2), START, 120)
RUNNING = 'sum by (cell) (vllm:num_requests_running{cell="us-east-3"})'


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), SERIES))


@pytest.fixture(scope="module")
def tls_prometheus(tmp_path_factory):
    d = tmp_path_factory.mktemp("prom-tls")
    yield from serve(PrometheusServer(d / "prom", SERIES, tls=make_tls(d / "tls")))


async def test_an_instant_vector_keeps_its_labels(prometheus):
    got = await Prometheus(prometheus.url).query(RUNNING, T0)
    assert isinstance(got, Vector)
    assert [(dict(s.labels), s.value) for s in got.samples] == [({"cell": "us-east-3"}, 16.0)]


async def test_no_series_is_an_empty_vector_not_a_failure(prometheus):
    got = await Prometheus(prometheus.url).query('vllm:num_requests_running{cell="nowhere"}', T0)
    assert got == Vector(())


async def test_scalar_string_and_range_vector_are_told_apart(prometheus):
    prom = Prometheus(prometheus.url)
    assert await prom.query("scalar(sum(vllm:num_requests_waiting))", T0) == Scalar(4.0)
    assert await prom.query('"hello"', T0) == Text("hello")
    ranged = await prom.query('vllm:num_requests_running{cell="us-east-3",pod="vllm-0"}[1m]', T0)
    assert isinstance(ranged, Matrix) and len(ranged.series) == 1
    assert {v for _, v in ranged.series[0].points} == {8.0}
    # What custom_query's missing resultType can't tell (bot/prom/connect.py says so): an empty range
    # vector reads as an empty instant vector, and a string literal that spells a number as a scalar.
    assert await prom.query('vllm:num_requests_running{cell="nowhere"}[1m]', T0) == Vector(())
    assert await prom.query('"4"', T0) == Scalar(4.0)


async def test_a_range_query_is_a_matrix_of_points(prometheus):
    got = await Prometheus(prometheus.url).query_range(RUNNING, T0 - 600, T0, 300)
    assert isinstance(got, Matrix)
    (series,) = got.series
    assert dict(series.labels) == {"cell": "us-east-3"}
    assert series.points == ((T0 - 600, 16.0), (T0 - 300, 16.0), (T0, 16.0))


async def test_a_rejected_query_carries_prometheuss_own_words(prometheus):
    got = await Prometheus(prometheus.url).query("sum(rate(x[5m])", T0)
    assert isinstance(got, Failed) and got.why is Why.REJECTED and got.status == 400
    assert got.error_type == "bad_data" and "parse error" in got.detail
    assert str(got).startswith('Prometheus rejected the query (invalid parameter "query": ')


async def test_nothing_listening_is_unreachable():
    got = await Prometheus(f"http://127.0.0.1:{free_port()}").query("up", T0)
    assert got == Failed(Why.UNREACHABLE, "ConnectionError")
    assert str(got) == "Prometheus can't be reached (ConnectionError)"


async def test_a_server_that_never_answers_times_out():
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # holds the request unanswered until the client gives up and hangs up
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        got = await Prometheus(f"http://127.0.0.1:{port}", timeout=0.3).query("up", T0)
    assert isinstance(got, Failed) and got.why is Why.TIMEOUT and got.detail == "ReadTimeout"


async def test_https_is_verified_and_trusted_with_its_ca(tls_prometheus):
    untrusted = await Prometheus(tls_prometheus.url).query(RUNNING, T0)
    assert untrusted == Failed(Why.TLS, "unable to get local issuer certificate")
    trusted = await Prometheus(tls_prometheus.url, ca_file=tls_prometheus.tls.ca_file).query(RUNNING, T0)
    assert isinstance(trusted, Vector) and trusted.values == [16.0]
    missing = tls_prometheus.tls.ca_file.parent / "missing.crt"
    got = await Prometheus(tls_prometheus.url, ca_file=missing).query(RUNNING, T0)
    assert got == Failed(Why.CA_FILE, f"PROMETHEUS_CA_FILE {missing} can't be read")


@pytest.mark.parametrize(
    ("status", "body", "content_type", "want"),
    [
        (502, "<html>Bad Gateway</html>", "text/html", Failed(Why.NOT_JSON, status=502)),
        (200, "<html>a login page</html>", "text/html", Failed(Why.NOT_JSON, status=200)),
        (200, '{"status": "success", "data": {"resultType": "vector"}}', "application/json", Failed(Why.MALFORMED)),
        (
            503,
            '{"status": "error", "errorType": "unavailable", "error": "shutting down"}',
            "application/json",
            Failed(Why.HTTP, "shutting down", 503, "unavailable"),
        ),
        (
            403,
            '{"status": "error", "error": "tenant not allowed"}',
            "application/json",
            Failed(Why.AUTH, "tenant not allowed", 403),
        ),
    ],
    ids=["proxy-error-page", "200-not-json", "200-wrong-shape", "503-with-error", "403-json"],
)
async def test_answers_that_are_not_the_query_apis(status, body, content_type, want):
    """Something that is not Prometheus (a proxy, a login page) answering on its URL. A 503 is
    answered once: the library's default retries (three, with backoff) are off."""

    async with answering(body, status, content_type) as url:
        got = await Prometheus(url).query("up", T0)
    assert got == want
