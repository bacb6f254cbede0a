"""route-weight: policy steps of the baseline, dwell, a guarded JSON patch, and the receivers'
headroom from a real Prometheus (healthy allows, burning refuses, down refuses, an answer that
is not a number per cell refuses by name)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.clusters import KubeError
from fbworld.kube import samples
from levers import hooks
from levers.base import Ctx, Target, params_of
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.levers import OPS, comparable, patches, replace_hook, say
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SHIPPED_QUERY = yaml.safe_load((REPO / "policies" / "levers.yaml").read_text())["headroom"]["query"]
LOCAL = "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3"  # receiver: us-east-2


@pytest.fixture
def policy_overrides() -> dict:
    return {}  # the shipped policy: its route-weight steps and dwell


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}  # the receivers' headroom check


@pytest.fixture(autouse=True)
def chat_local(cells) -> None:
    """A cell-local route beside the fleet's chat-global."""
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 50, "cell-us-east-3": 50}))


@pytest.fixture
def asked(app) -> list:
    """Stand-in for the approval flow: record what was asked."""
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    return asked


async def _approve_and_run(app, asked: list, out: str) -> str:
    assert "needs approval (acts on the fleet context `global`)" in out, out
    rec = asked[-1]
    assert await lever_store(app.services).transition(rec.id, {"pending_approval"}, "approved", approved_by="U_IC")
    return (await execute_approved(app.services, rec.id, "U_IC")).message


def weights(cell, name="chat-global") -> dict[str, int]:
    route = cell.get("httproute", name, "edge")
    return {b["name"]: b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]}


async def test_steps_along_policy_with_dwell_and_headroom(app, cells, clock, asked):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1", OPS, inc.channel_id)
    out = await _approve_and_run(app, asked, out)
    assert (
        "REQ-1 route-weight edge/chat-global (fleet): applied and verified (cell-us-east-1 weight 50→25 "
        "(50% of baseline 50)" in out
    ), out
    assert weights(cells.fleet) == {"cell-us-east-1": 25, "cell-us-east-2": 50, "cell-us-east-3": 0}
    rec = await lever_store(app.services).get("REQ-1")
    assert any("headroom ok: TTFT burn 1h us-east-2 0.10x" in n for n in rec.notes), rec.notes
    sent = patches(cells.fleet)[-1]
    assert sent.content_type == "application/json-patch+json"
    assert {"op": "test", "path": "/spec/rules/0/backendRefs/0/weight", "value": 50} in sent.body
    assert {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "cell-us-east-1"} in sent.body

    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1", OPS, inc.channel_id)
    assert "Dwell: the last step of this backend was at 03:10 UTC; the next is allowed at 03:15 UTC" in out, out
    clock.advance(5 * 60)
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1 weight=10", OPS, inc.channel_id)
    assert "One step at a time along 50 → 25 → 0 (baseline 50)" in out and "weight=0" in out, out
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1 weight=0", OPS, inc.channel_id)
    out = await _approve_and_run(app, asked, out)
    assert "weight 25→0 (0% of baseline 50)" in out, out
    clock.advance(5 * 60)
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1", OPS, inc.channel_id)
    assert "is at 0, the last step of 50 → 25 → 0" in out, out

    # Undo steps back one step, newest first; the older step can't be undone over the newer one.
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undo failed" in out and "changed since REQ-1 applied" in out, out
    out = await say(app, "undo REQ-4", OPS, inc.channel_id)
    assert "undone" in out, out
    assert weights(cells.fleet)["cell-us-east-1"] == 25
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undone" in out, out
    original = samples.http_route(backends={"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0})
    now = comparable(cells.fleet.get("httproute", "chat-global", "edge"), drop_provenance=False)
    assert now["spec"] == original["spec"] and "annotations" not in now["metadata"]


async def test_burning_receiver_refuses_with_figures(app, cells, asked):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-2", OPS, inc.channel_id)
    assert "No headroom: TTFT SLO burn over 1h is us-east-1 20.00x (must be below 1x)" in out, out
    assert not patches(cells.fleet) and not asked


async def test_cell_local_route_needs_no_approval(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert "applied and verified (cell-us-east-3 weight 50→25" in out, out
    assert weights(cells.east3, "chat-local") == {"cell-us-east-2": 50, "cell-us-east-3": 25}
    assert not patches(cells.fleet)


@pytest.mark.parametrize(
    "app_settings", [{"prometheus_url": f"http://127.0.0.1:{free_port()}"}], ids=["nothing-listening"]
)
async def test_prometheus_down_refuses(app, cells, asked):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert "Prometheus can't be reached for the headroom check" in out and "fail closed" in out, out
    assert not patches(cells.east3)


async def test_guard_fails_a_concurrent_edit_instead_of_overwriting(app, cells):
    """The planned JSON patch, sent after someone else moved the weight, is refused by the server."""
    inc = await app.declare(roles={"ops": OPS})
    lever = LEVERS["route-weight"]
    client = await app.services.clusters.client("us-east-3")
    ctx = Ctx(
        svc=app.services,
        kube=client,
        req_id="REQ-99",
        incident=inc.id,
        cell="us-east-3",
        context="us-east-3",
        target=Target("edge", "chat-local"),
        params=params_of(lever, {"backend": "cell-us-east-3"}),
        requester=OPS,
    )
    plan = await lever.plan(ctx, await client.get(lever.path(ctx)))
    route = cells.east3.get("httproute", "chat-local", "edge")
    route["spec"]["rules"][0]["backendRefs"][1]["weight"] = 40  # a human edit in between
    cells.east3.put(route)
    with pytest.raises(KubeError) as err:
        await client.send(plan.calls[0])
    assert err.value.code == 422
    assert weights(cells.east3, "chat-local")["cell-us-east-3"] == 40


async def test_no_data_for_a_receiver_refuses(app, cells):
    cells.east3.put(samples.http_route("edge", "chat-eu", {"cell-us-east-3": 50, "cell-eu-west-9": 50}))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-eu --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id)
    assert out == (
        "REQ-1 route-weight edge/chat-eu (us-east-3) not pulled, nothing changed: "
        "Prometheus has no TTFT data for receiving cell eu-west-9; can't confirm headroom, "
        "so nothing changed."
    ), out
    assert not patches(cells.east3)


@pytest.mark.parametrize("app_settings", [{}], ids=["no-prometheus"])
async def test_prometheus_url_unset_refuses(app, cells):
    assert not app.services.settings.prometheus_url
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert out == (
        "REQ-1 route-weight edge/chat-local (us-east-3) not pulled, nothing changed: "
        "Headroom check needs Prometheus and PROMETHEUS_URL is not set; "
        "route-weight refuses without it."
    ), out
    assert not patches(cells.east3)


@pytest.mark.parametrize("policy_overrides", [{"headroom": {"query": f"scalar({SHIPPED_QUERY})"}}], ids=["scalar"])
async def test_scalar_result_is_one_figure(app, cells, asked):
    """Prometheus answers a scalar as `[ts, "value"]`, not a list of series: one figure, same gates."""
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, LOCAL, OPS, inc.channel_id)
    assert "applied and verified (cell-us-east-3 weight 50→25" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    assert any("headroom ok: TTFT burn 1h us-east-2 0.10x (< 1x)" in n for n in rec.notes), rec.notes

    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-2", OPS, inc.channel_id)
    assert "No headroom: TTFT SLO burn over 1h is us-east-1 20.00x (must be below 1x)" in out, out

    # scalar() of no series is NaN, which counts as hot rather than as "no burn".
    cells.east3.put(samples.http_route("edge", "chat-eu", {"cell-us-east-3": 50, "cell-eu-west-9": 50}))
    out = await say(app, "lever route-weight edge/chat-eu --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id)
    assert "No headroom: TTFT SLO burn over 1h is eu-west-9 NaN (must be below 1x)" in out, out
    assert len(patches(cells.east3)) == 1 and not asked


@pytest.mark.parametrize(
    ("policy_overrides", "why"),
    [
        ({"headroom": {"query": '"$cell"'}}, "the headroom query returns a string, not a number per cell"),
        (
            {"headroom": {"query": 'vllm:time_to_first_token_seconds_count{cell="$cell"}[5m]'}},
            "the headroom query returns a range vector, not a number per cell",
        ),
        (
            {"headroom": {"query": 'rate(vllm:time_to_first_token_seconds_count{cell="$cell"})'}},
            "Prometheus rejected the headroom query (",
        ),
    ],
    ids=["string", "range-vector", "bad-promql"],
)
async def test_answer_that_is_not_a_figure_refuses_by_name(app, cells, why):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, LOCAL, OPS, inc.channel_id)
    assert out.startswith(
        "REQ-1 route-weight edge/chat-local (us-east-3) not pulled, nothing changed: No headroom figure for us-east-2: "
    ), out
    assert why in out and out.endswith("route-weight refuses without it (fail closed). Nothing changed."), out
    assert not patches(cells.east3)
