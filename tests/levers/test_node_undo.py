"""node-quarantine undo removes only what the lever added: taints and labels put on the node since
(a cordon, a not-ready taint, a label) stay, a taint it overwrote comes back, and a taint added
between undo's read and its patch is neither lost nor overwritten. The floor counts every page."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import OPS, kubectl, patches, say

NODE = "gpu-a3-0001"
OURS = {"key": "gpu.corp/quarantine", "value": "xid79", "effect": "NoSchedule"}
LABELS = ("gpu.corp/quarantine-reason", "gpu.corp/quarantine-ticket")


def node(cells) -> dict:
    return cells.east3.get("node", NODE)


def taints(cells) -> list[dict]:
    return [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in node(cells)["spec"].get("taints", [])]


async def until(ready) -> None:
    for _ in range(250):
        if ready():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting")


async def quarantine(app, inc) -> None:
    out = await say(app, f"lever node-quarantine {NODE} --cell us-east-3 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out


async def test_undo_keeps_a_cordon_a_not_ready_taint_and_the_gpu_taint(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    gpu = [t for t in taints(cells) if t["key"] == "nvidia.com/gpu"]
    assert gpu, "the GPU pool's own taint (samples.gpu_node)"
    await quarantine(app, inc)
    assert taints(cells)[0] == OURS

    # Since then: someone cordoned the node, the node controller marked it not-ready, a label was added.
    await kubectl(cells.kubeconfig, "us-east-3", "cordon", NODE)
    await kubectl(cells.kubeconfig, "us-east-3", "taint", "nodes", NODE, "node.kubernetes.io/not-ready:NoExecute")
    await kubectl(cells.kubeconfig, "us-east-3", "label", "nodes", NODE, "ops.corp/drain=soon")
    before_undo = node(cells)["spec"]["taints"]

    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert out.startswith("REQ-1 node-quarantine gpu-a3-0001 (us-east-3): undone by") and "verified" in out, out
    after = node(cells)
    # The GPU, not-ready and any cordon taint, as they were (timeAdded included), only ours gone.
    assert after["spec"]["taints"] == [t for t in before_undo if t.get("key") != OURS["key"]]
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"} in [
        {"key": t["key"], "effect": t["effect"]} for t in after["spec"]["taints"]
    ]
    assert gpu[0] in taints(cells) and OURS not in taints(cells)
    assert after["spec"]["unschedulable"] is True
    labels = after["metadata"]["labels"]
    assert labels["ops.corp/drain"] == "soon" and not set(LABELS) & set(labels)
    assert (await lever_store(app.services).get("REQ-1")).state == "undone"
    [undo] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.undo"]
    assert undo["detail"]["verified"] is True
    # The taint list was replaced under a test of the exact list undo read.
    assert {"op": "test", "path": "/spec/taints", "value": before_undo} in undo["detail"]["patch"]


async def test_undo_puts_back_the_taint_it_overwrote_and_leaves_changed_labels(app, cells):
    n = samples.gpu_node(NODE, "us-east-3")
    n["spec"]["taints"] = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "gpu.corp/quarantine", "value": "burn-in", "effect": "NoSchedule"},
    ]
    cells.east3.put(n)
    original = node(cells)
    inc = await app.declare(roles={"ops": OPS})
    await quarantine(app, inc)
    assert taints(cells) == [OURS, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]

    # A person re-labelled the reason since: that value is theirs now, undo leaves it.
    await kubectl(
        cells.kubeconfig, "us-east-3", "label", "nodes", NODE, "gpu.corp/quarantine-reason=xid48", "--overwrite"
    )
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undone" in out and "verified" in out, out
    after = node(cells)
    assert after["spec"]["taints"] == original["spec"]["taints"]  # burn-in back, in its place
    assert after["metadata"]["labels"]["gpu.corp/quarantine-reason"] == "xid48"
    assert "gpu.corp/quarantine-ticket" not in after["metadata"]["labels"]


async def test_a_taint_added_while_undo_is_in_flight_is_kept(app, cells):
    """The taint list is tested against what undo read: a change in between fails that patch (422),
    undo reads again once and removes only its own taint from the new list."""
    inc = await app.declare(roles={"ops": OPS})
    await quarantine(app, inc)
    path = rf"/api/v1/nodes/{NODE}$"
    cells.east3.delay_next("PATCH", path, seconds=3.0)
    cells.east3.requests.clear()
    undo = asyncio.create_task(say(app, "undo REQ-1", OPS, inc.channel_id))
    await until(lambda: cells.east3.find_requests("PATCH", path))
    # While undo's patch waits: the node controller marks the node not-ready.
    await kubectl(cells.kubeconfig, "us-east-3", "taint", "nodes", NODE, "node.kubernetes.io/not-ready:NoExecute")
    out = await undo
    assert "undone" in out and "verified" in out, out
    statuses = [
        r.status for r in cells.east3.find_requests("PATCH", path) if r.query.get("fieldManager") == "firebreak"
    ]
    assert statuses == [422, 200]
    keys = [t["key"] for t in taints(cells)]
    assert "node.kubernetes.io/not-ready" in keys and "gpu.corp/quarantine" not in keys
    assert "nvidia.com/gpu" in keys


async def test_a_taint_changing_under_every_undo_attempt_fails_cleanly(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    await quarantine(app, inc)
    path = rf"/api/v1/nodes/{NODE}$"
    cells.east3.delay_next("PATCH", path, seconds=0.4, times=2)
    undo = asyncio.create_task(say(app, "undo REQ-1", OPS, inc.channel_id))

    def undo_patches() -> list:  # undo sends JSON patches (a list); the lever sent a merge patch
        return [r for r in cells.east3.find_requests("PATCH", path) if isinstance(r.body, list)]

    for i in range(2):
        # Each time undo's patch waits, the node's taints change (as a controller would change them).
        await until(lambda k=i: len(undo_patches()) > k)
        obj = node(cells)
        obj["spec"]["taints"].append({"key": f"example.corp/flap{i}", "value": "x", "effect": "NoSchedule"})
        cells.east3.put(obj)
    out = await undo
    before = node(cells)
    assert "undo failed" in out and "nothing changed, REQ-1 is still applied" in out, out
    assert "testing value /spec/taints failed" in out, out  # the 422's cause, shown
    assert [t["key"] for t in before["spec"]["taints"]][-2:] == ["example.corp/flap0", "example.corp/flap1"]
    assert OURS in taints(cells)
    assert (await lever_store(app.services).get("REQ-1")).state == "done"


@pytest.fixture
def policy_overrides() -> dict:
    return {"api_timeout_seconds": 5, "node_quarantine": {"max_quarantined_fraction": 0.5}}


async def test_the_floor_counts_every_page_of_nodes(app, cells):
    """A large cell's node list comes in pages (limit/continue): every GPU node counts for the floor."""
    for i in range(10, 530):
        cells.east3.put(samples.gpu_node(f"gpu-a3-{i:04d}", "us-east-3"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever node-quarantine {NODE} --cell us-east-3 reason=xid79 --dry-run", OPS, inc.channel_id)
    assert "1 of 530 GPU nodes in us-east-3 quarantined after this" in out, out
    lists = cells.east3.find_requests("GET", r"^/api/v1/nodes$")
    assert [r.query.get("limit") for r in lists] == ["500", "500"] and lists[1].query.get("continue"), lists
    assert not [r for r in patches(cells.east3) if r.query.get("dryRun") != "All"]
