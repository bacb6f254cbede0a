"""Issue 36 item 9: bot/prom/connect.py names what it catches. What the library and the wire raise
(no connection, a non-200, a body that is not JSON or not the query API's shape) is a typed
``Failed``; a bug in Firebreak's own parsing is not "unreachable" or "malformed" but surfaces, with
its traceback, to the caller (whose job or request logs it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.prom import Failed, Sample, Vector, Why, connect
from bot.prom.connect import Prometheus
from tests.support.harness import T0
from tests.support.prometheus import answering

VECTOR = (
    '{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"cell": "a"}, "value": [1, "2"]}]}}'
)


@pytest.fixture
async def prometheus_url() -> AsyncIterator[str]:
    async with answering(VECTOR) as url:
        yield url


async def test_a_parser_bug_surfaces_with_its_traceback(prometheus_url, monkeypatch):
    assert await Prometheus(prometheus_url).query("up", T0) == Vector((Sample({"cell": "a"}, 2.0),))

    def broken(raw: object) -> dict[str, str]:
        raise TypeError("a bug in Firebreak's parser")

    monkeypatch.setattr(connect, "_labels", broken)
    with pytest.raises(TypeError, match="a bug in Firebreak's parser") as raised:
        await Prometheus(prometheus_url).query("up", T0)
    assert raised.traceback[-1].name == "broken"  # the traceback reaches the bug, not a Failed


async def test_an_unexpected_error_in_the_call_is_not_unreachable(prometheus_url, monkeypatch):
    def broken(self: object, *args: object, **kwargs: object) -> object:
        raise RuntimeError("not a network failure")

    monkeypatch.setattr(connect.PrometheusConnect, "custom_query", broken)
    with pytest.raises(RuntimeError, match="not a network failure"):
        await Prometheus(prometheus_url).query("up", T0)


@pytest.mark.parametrize(
    "body",
    [
        '{"status": "success"}',  # no data: the library's own response.json()["data"] raises KeyError
        '["a list, not an object"]',  # the library's ["data"] on a list raises TypeError
        '{"data": {"result": [{"value": [1, "2"]}]}}',  # a sample without its metric
        '{"data": {"result": [{"metric": {}, "value": "2"}]}}',  # a value that is not [time, "v"]
        '{"data": {"result": [{"metric": {}, "value": [1, "two"]}]}}',  # a value that is not a number
        '{"data": {"result": [{"metric": [], "value": [1, "2"]}]}}',  # labels that are not an object
        '{"data": {"result": [1, {"metric": {}, "value": [1, "2"]}]}}',  # a sample that is not an object
        '{"data": {"result": [{"metric": {}, "values": [[1]]}]}}',  # a range point without its value
        '{"data": {"result": {"metric": {}}}}',  # a result that is not a list
    ],
)
async def test_a_200_that_is_not_the_query_apis_shape_is_malformed(body):
    async with answering(body) as url:
        assert await Prometheus(url).query("up", T0) == Failed(Why.MALFORMED)
