"""A cell name (or taint key) put into PromQL stays inside its string literal (issue 25): every
shipped query that takes one (triage's queries.yaml; route-weight's headroom and rate queries and
node-quarantine's return gate in levers.yaml) is rendered with hostile values and sent to a real
Prometheus through the app's client. Each must parse and match nothing: neither a parse error nor
the injected `vector(42)`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from bot.policy import load_policy
from bot.policy.queries import TriageQuery, Unit
from bot.prom import Failed, Matrix, Vector
from bot.prom.connect import Prometheus
from bot.prom.promql import escape
from tests.support.harness import T0
from tests.support.prometheus import CellHealth, PrometheusServer, ensure_services_installed, health_series
from tests.support.triage import SHIPPED, serve

# A quote that would close the string and add a series of its own; a trailing backslash that would
# escape the closing quote; a line break.
HOSTILE = ('x"} or vector(42) or up{cell="y', "a\\", 'a\\"} or vector(42) or up{x="', "a\nb")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    ensure_services_installed()
    yield from serve(
        PrometheusServer(tmp_path_factory.mktemp("prom"), health_series("us-east-1", CellHealth(), T0 - 3600, 90))
    )


@pytest.fixture
async def prom(server: PrometheusServer) -> AsyncIterator[Prometheus]:
    client = Prometheus(server.url)
    yield client
    await client.close()


def test_escape_keeps_a_value_inside_a_double_quoted_string() -> None:
    assert escape('a"b\\c\nd\re') == 'a\\"b\\\\c\\nd\\re'
    assert escape("us-east-1") == "us-east-1"  # a cell name as CELL_NAME allows is unchanged


@pytest.mark.parametrize("cell", HOSTILE, ids=["quote-injection", "trailing-backslash", "backslash-quote", "newline"])
async def test_every_shipped_query_keeps_a_hostile_cell_name_in_its_string(prom: Prometheus, cell: str) -> None:
    policy = load_policy(SHIPPED)
    taint_key = policy.levers.node_quarantine.taint_key
    sent = {q.name: q.render(cell, taint_key) for q in policy.queries.queries}
    sent["headroom"] = policy.levers.headroom.render(cell)
    sent["route-weight rate"] = policy.levers.price.route_weight.render(cell)
    gate = policy.levers.node_quarantine.return_gate
    for field, query in gate.queries().items():  # a hostile node name too
        sent.update({f"return gate {field} {i}": q for i, q in enumerate(gate.render_each(query, cell, cell, "600s"))})
    for name, promql in sent.items():
        got = await prom.query(promql, T0)
        assert not isinstance(got, Failed), (name, promql, got)
        # The gate's raw XID count query is a range vector: a Matrix.
        assert got in (Vector(()), Matrix(())), (name, promql, got)


HOSTILE = 'k"} or vector(42) or up{x="'


async def test_a_hostile_taint_key_stays_in_its_string(prom: Prometheus) -> None:
    # The shipped rows name the dedicated taints (the quarantine row); `$taint_key` is a policy's own.
    policy = load_policy(SHIPPED)
    q = next(q for q in policy.queries.queries if "$dedicated_taints" in q.query)
    got = await prom.query(q.render("eu-west-9", HOSTILE, dedicated_taints=[HOSTILE, "nvidia.com/gpu"]), T0)
    assert isinstance(got, Vector) and got.samples == (), got
    own = TriageQuery(
        name="fenced",
        title="fenced",
        unit=Unit.count,
        query='count(kube_node_spec_taint{cell="$cell",key="$taint_key"})',
    )
    got = await prom.query(own.render("eu-west-9", HOSTILE), T0)
    assert isinstance(got, Vector) and got.samples == (), got
