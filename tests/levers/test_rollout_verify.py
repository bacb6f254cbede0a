"""rollout-abort is verified by Argo's own status, for a basic canary, a traffic-routed canary and a
blue-green rollout alike (the fake's argo controller does what argo-rollouts v1.9 does on abort):
aborted (phase Degraded, "RolloutAborted: ..."), the stable ReplicaSet fully available, the active
service back on stable (blue-green), stable weight 100 (traffic routing only)."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, say


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 3, "api_timeout_seconds": 2}


def seed(cell, rollout: dict) -> str:
    stored = cell.put(rollout)  # stored with a uid, so its ReplicaSets are owned by it
    for rs in samples.rollout_replica_sets(stored):
        cell.put(rs)
    return stored["metadata"]["name"]


async def abort(app, inc, name: str) -> str:
    return await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id)


async def test_basic_canary_abort_is_verified_by_argos_status(app, cells):
    name = seed(cells.east3, samples.rollout_canary(traffic_routing=False))
    cells.east3.start_controller("argo", interval=0.1)
    inc = await app.declare(roles={"model": MODEL})
    out = await abort(app, inc, name)
    assert out.startswith("REQ-1 rollout-abort serve-chat/llm-13b (us-east-3): applied and verified (aborted; "), out
    assert (
        "RolloutAborted: Rollout aborted update to revision 2; stable ReplicaSet llm-13b-6d9f7c8b5 4/4 available"
    ) in out, out
    # A basic canary has no traffic weights to verify by (its price names the setWeight it had reached).
    assert "%" not in out.split("\nPrice (read now):")[0], out
    assert "No Firebreak undo" in out and "deploy" in out
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.result["verified"] is True
    [done] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.done"]
    assert done["detail"]["verified"] is True


async def test_basic_canary_not_yet_aborted_by_argo_is_not_verified(app, cells):
    """No controller: abort is set, but Argo never marked it aborted nor scaled stable back."""
    name = seed(cells.east3, samples.rollout_canary(traffic_routing=False))
    inc = await app.declare(roles={"model": MODEL})
    out = await abort(app, inc, name)
    assert "applied, rv " in out and "but NOT verified: abort set, but Argo has not marked it aborted" in out, out
    assert "(phase Paused: CanaryPauseStep); stable ReplicaSet llm-13b-6d9f7c8b5 3/4 available after 3s" in out, out


async def test_blue_green_abort_is_verified_by_argos_status(app, cells):
    name = seed(cells.east3, samples.rollout_bluegreen())
    cells.east3.start_controller("argo", interval=0.1)
    inc = await app.declare(roles={"model": MODEL})
    out = await abort(app, inc, name)
    assert out.startswith("REQ-1 rollout-abort serve-chat/llm-embed (us-east-3): applied and verified (aborted; "), out
    assert "stable ReplicaSet llm-embed-5f6d7c8b9 3/3 available; active service on stable" in out, out


async def test_traffic_routed_canary_also_needs_stable_weight_100(app, cells):
    stuck = seed(cells.east3, samples.rollout_canary(name="llm-13b-stuck", traffic_routing=True))
    name = seed(cells.east3, samples.rollout_canary(traffic_routing=True))
    inc = await app.declare(roles={"model": MODEL})

    async def half_a_controller() -> None:
        """Argo marks it aborted and scales stable back, but the traffic router never moves the weights."""
        for _ in range(200):
            ro = cells.east3.get("rollout", stuck, "serve-chat")
            if ro["status"].get("abort"):
                ro["status"].update(phase="Degraded", message="RolloutAborted: Rollout aborted update to revision 2")
                cells.east3.put(ro)
                rs = cells.east3.get("replicaset", f"{stuck}-6d9f7c8b5", "serve-chat")
                rs["spec"]["replicas"] = 4
                rs["status"].update(replicas=4, readyReplicas=4, availableReplicas=4)
                cells.east3.put(rs)
                return
            await asyncio.sleep(0.05)

    task = asyncio.create_task(half_a_controller())
    out = await abort(app, inc, stuck)
    await task
    assert "NOT verified: abort set, but stable at 75%, canary 25% after 3s" in out, out
    assert "RolloutAborted" not in out  # what Argo did show is not listed as missing

    cells.east3.start_controller("argo", interval=0.1)
    out = await abort(app, inc, name)
    assert "applied and verified (aborted; RolloutAborted: " in out, out
    assert "stable ReplicaSet llm-13b-6d9f7c8b5 4/4 available; stable back at 100%" in out, out
