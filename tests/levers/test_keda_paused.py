"""keda-pause uses KEDA's own `autoscaling.keda.sh/paused: "true"` (issue 25): KEDA v2.20 freezes the
target at its current replicas, so nothing is read and written back (which would race the
autoscaler). The count (`paused-replicas`) is only an explicit option. The fake's keda controller
does what KEDA's ScaledObject reconciler does with both annotations; undo removes only what the
lever set."""

from __future__ import annotations

import asyncio

from tests.support.levers import OPS, patches, say

NS = "serve-chat"
PAUSED = "autoscaling.keda.sh/paused"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"


async def until(check, tries: int = 100):
    for _ in range(tries):
        got = check()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


def paused_condition(cell, name: str = "llm-70b") -> dict | None:
    so = cell.get("scaledobject", name, NS)
    return next((c for c in (so.get("status") or {}).get("conditions") or [] if c["type"] == "Paused"), None)


async def test_the_emulated_keda_pauses_as_v2_20_does(cells):
    cell = cells.east3
    cell.start_controller("keda", interval=0.05)
    assert await until(lambda: cell.get("hpa", "keda-hpa-llm-70b", NS))  # KEDA's HPA for the target
    so = cell.get("scaledobject", "llm-70b", NS)
    so["metadata"]["annotations"] = {PAUSED: "true"}
    cell.put(so)
    assert await until(lambda: (paused_condition(cell) or {}).get("status") == "True")
    assert paused_condition(cell) == {
        "type": "Paused",
        "status": "True",
        "reason": "ScaledObjectPaused",
        "message": "ScaledObject is paused",
    }
    await until(lambda: cell.get("hpa", "keda-hpa-llm-70b", NS) is None)
    assert cell.get("deployment", "llm-70b", NS)["spec"]["replicas"] == 6  # frozen where it was

    so = cell.get("scaledobject", "llm-70b", NS)
    so["metadata"]["annotations"] = {PAUSED_REPLICAS: "2"}
    cell.put(so)
    await until(lambda: cell.get("deployment", "llm-70b", NS)["spec"]["replicas"] == 2)  # scaled via /scale
    assert cell.get("scaledobject", "llm-70b", NS)["status"]["pausedReplicaCount"] == 2

    so = cell.get("scaledobject", "llm-70b", NS)
    so["metadata"]["annotations"] = {}
    cell.put(so)
    assert await until(lambda: (paused_condition(cell) or {}).get("reason") == "ScaledObjectUnpaused")
    assert "pausedReplicaCount" not in cell.get("scaledobject", "llm-70b", NS)["status"]
    assert await until(lambda: cell.get("hpa", "keda-hpa-llm-70b", NS))  # back under the autoscaler


async def test_pause_sets_kedas_paused_annotation_without_reading_the_count(app, cells):
    cell = cells.east3
    so = cell.get("scaledobject", "llm-70b", NS)
    so["metadata"]["annotations"] = {"autoscaling.keda.sh/paused-scale-out": "true"}  # someone else's
    cell.put(so)
    cell.start_controller("keda", interval=0.05)
    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()
    out = await say(app, "lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified (paused at its current replicas (Deployment llm-70b, " in out, out
    # No read-then-write race with the autoscaler: nothing writes the count (the price only reads /scale to
    # name the replicas frozen, and the write is the paused annotation alone).
    assert not [r for r in cell.requests if r.path.endswith("/scale") and r.method != "GET"]
    assert "Deployment serve-chat/llm-70b frozen at: 6 replicas" in out, out
    annotations = cell.get("scaledobject", "llm-70b", NS)["metadata"]["annotations"]
    assert annotations[PAUSED] == "true" and PAUSED_REPLICAS not in annotations
    assert await until(lambda: (paused_condition(cell) or {}).get("reason") == "ScaledObjectPaused")
    assert cell.get("deployment", "llm-70b", NS)["spec"]["replicas"] == 6

    undo = await app.run("undo REQ-1", user=OPS, channel=inc.channel_id)
    assert "undone" in undo, undo
    annotations = cell.get("scaledobject", "llm-70b", NS)["metadata"]["annotations"]
    assert annotations == {"autoscaling.keda.sh/paused-scale-out": "true"}  # only the lever's own went


async def test_the_count_is_an_explicit_option(app, cells):
    cell = cells.east3
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b --cell us-east-3 replicas=4", OPS, inc.channel_id)
    assert "applied and verified (paused at 4 replicas (Deployment llm-70b)" in out, out
    assert cell.get("scaledobject", "llm-70b", NS)["metadata"]["annotations"][PAUSED_REPLICAS] == "4"


async def test_an_already_paused_object_is_refused(app, cells):
    cell = cells.east3
    so = cell.get("scaledobject", "llm-70b", NS)
    so["metadata"]["annotations"] = {PAUSED_REPLICAS: "3"}
    cell.put(so)
    inc = await app.declare(roles={"ops": OPS})
    writes = len(patches(cell))
    out = await say(app, "lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS, inc.channel_id)
    assert "not pulled, nothing changed: ScaledObject serve-chat/llm-70b already carries " in out, out
    assert "autoscaling.keda.sh/paused-replicas='3', which KEDA reads as paused" in out, out
    assert len(patches(cell)) == writes
