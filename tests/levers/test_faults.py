"""API faults: 403, 404, 409, 422, 500 and a timeout each give a clear message in Slack, an audit
entry, a failed request, and an object exactly as it was."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, OPS, channel_texts, comparable, say

CQ_PATCH = r"/clusterqueues/research-h100$"


@pytest.fixture
def policy_overrides() -> dict:
    return {"api_timeout_seconds": 1, "rollout_verify_seconds": 1}


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}  # route-weight's headroom check


@pytest.mark.parametrize(
    "status,times,expect",
    [
        (403, 1, "403 Forbidden"),
        (404, 1, "404 NotFound"),
        (409, 2, "409 Conflict"),
        (422, 1, "422 Invalid"),
        (500, 1, "500 InternalError"),
    ],
)
async def test_api_error_fails_cleanly(status, times, expect, app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    cells.east3.fail_next("PATCH", CQ_PATCH, status, times=times, message=f"injected {status}")
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert out.startswith("REQ-1 kueue-hold research-h100 (us-east-3): failed: ") and expect in out, out
    assert "nothing changed" in out or "nothing applied" in out, out
    assert "Traceback" not in out
    assert any(t == out for t in channel_texts(app, inc.channel_id))
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.state == "failed" and rec.result["ok"] is False
    failed = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.failed"]
    assert failed and failed[-1]["detail"]["request"] == "REQ-1"
    assert expect.split()[0] in failed[-1]["detail"]["message"]


async def test_conflict_once_is_retried_against_the_new_version(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.fail_next("PATCH", CQ_PATCH, 409)
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    assert [r.status for r in cells.east3.find_requests("PATCH")] == [409, 200]


async def test_timeout_reports_and_late_write_cannot_land(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    cells.east3.delay_next("PATCH", CQ_PATCH, seconds=2.5)
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "failed: Timeout" in out and "nothing changed (read back, and fenced" in out, out
    # The slow PATCH still reaches the server later: its resourceVersion precondition must make it fail.
    for _ in range(100):
        first = cells.east3.find_requests("PATCH")[0]
        if first.status is not None:
            break
        await asyncio.sleep(0.05)
    assert first.status == 409
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)
    assert (await lever_store(app.services).get("REQ-1")).state == "failed"
    assert out.startswith("REQ-1 kueue-hold research-h100 (us-east-3): failed: Timeout: no answer within 1s")
    assert out in channel_texts(app, inc.channel_id)
    [failed] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.failed"]
    assert failed["detail"]["request"] == "REQ-1" and failed["detail"]["message"] == out
    assert failed["detail"]["reason"].startswith("Timeout: no answer within 1s")


async def test_second_call_failing_restores_the_first(app, cells):
    """rollout-abort annotates, then patches /status; if /status fails, the annotations go back."""
    inc = await app.declare(roles={"model": MODEL})
    original = cells.east3.get("rollout", "llm-70b", "serve-chat")
    # A Role that may patch Rollouts but not rollouts/status (a 5xx there is read back instead:
    # test_bad_input.py).
    denied = (
        'rollouts.argoproj.io "llm-70b" is forbidden: User "fake-user" cannot patch resource "rollouts/status" '
        'in API group "argoproj.io" in the namespace "serve-chat"'
    )
    cells.east3.fail_next("PATCH", r"/rollouts/llm-70b/status$", 403, message=denied)
    out = await say(app, "lever rollout-abort serve-chat/llm-70b --cell us-east-3", MODEL, inc.channel_id)
    assert f"failed: 403 Forbidden: {denied}; nothing changed" in out, out
    assert comparable(cells.east3.get("rollout", "llm-70b", "serve-chat"), False) == comparable(original, False)


async def test_missing_object_and_unknown_cell_are_clear(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold no-such-queue --cell us-east-3", OPS, inc.channel_id)
    assert out == (
        "ClusterQueue no-such-queue not found in us-east-3; nothing changed. "
        "Check the name (and namespace) with kubectl get."
    ), out
    out = await say(app, "lever kueue-hold research-h100 --cell eu-west-9", OPS, inc.channel_id)
    assert (
        out.startswith("Not pulled, nothing changed: no kube context `eu-west-9` for cell eu-west-9")
        and "us-east-3" in out
    ), out
    out = await say(app, "lever jobset-suspend pretrain-405b --cell us-east-3", OPS, inc.channel_id)
    assert "<namespace>/<name>" in out, out
    out = await say(app, "lever node-quarantine gpu-a3-0001 --cell us-east-3", OPS, inc.channel_id)
    assert "`reason`: required" in out and "reason=<xid79>" in out, out
    out = await say(app, "lever frobnicate x", OPS, inc.channel_id)
    assert "is not a lever" in out and "Usage" in out, out
    assert not [r for r in cells.east3.requests if r.method != "GET"]


ROUTE_PATCH = r"/httproutes/chat-local$"


async def test_json_patch_422_retries_only_a_failed_test_op(app, cells):
    """route-weight sends a guarded JSON patch. A failed `test` op means the route moved: re-read and,
    if the plan still holds, send once more. A schema 422 is final: not retried as a conflict."""
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 50, "cell-us-east-3": 50}))
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("httproute", "chat-local", "edge")
    cells.east3.fail_next(
        "PATCH",
        ROUTE_PATCH,
        422,
        reason="Invalid",
        message=(
            'HTTPRoute.gateway.networking.k8s.io "chat-local" is invalid: spec.rules[0].backendRefs[1].weight: '
            "Invalid value: 25: must be a multiple of 10"
        ),
    )
    out = await route_step(app, inc)
    assert 'failed: 422 Invalid: HTTPRoute.gateway.networking.k8s.io "chat-local" is invalid' in out, out
    assert [r.status for r in cells.east3.find_requests("PATCH", ROUTE_PATCH)] == [422]
    assert comparable(cells.east3.get("httproute", "chat-local", "edge"), False) == comparable(original, False)

    cells.east3.fail_next(
        "PATCH",
        ROUTE_PATCH,
        422,
        reason="Invalid",
        message="testing value /metadata/resourceVersion failed: test failed",
    )
    out = await route_step(app, inc)
    assert "applied and verified (cell-us-east-3 weight 50→25" in out, out
    assert [r.status for r in cells.east3.find_requests("PATCH", ROUTE_PATCH)] == [422, 422, 200]


async def route_step(app, inc) -> str:
    return await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
