"""Issue 35 item 5: a stored lever record drives writes with no person choosing them (undo, the settle
timer, the restart sweep). Someone who can write Firebreak's Redis rewrites a record, as an attacker
would, to make those writes patch another field or another object. Firebreak recomputes from the
lever's own code and target which object and which fields the record may name, and refuses anything
else: audited, posted in the incident channel, nothing patched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from levers.executor import execute_approved
from levers.store import lever_store, request_key
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, _crashed_executing, _stored, channel_texts, comparable, patches, say, start_hooks

HOLD = "lever kueue-hold research-h100 --cell us-east-3"
NODE = "/api/v1/nodes/gpu-a3-0001"
GPU_LABEL = "/metadata/labels/nvidia.com~1gpu.present"


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2, "stuck_after_seconds": 300}


async def _tamper(app, rid: str, **fields: Any) -> None:
    """What a Redis writer does: HSET the record's fields (JSON, as the store keeps them)."""
    await app.services.redis.hset(request_key(rid), mapping={k: json.dumps(v) for k, v in fields.items()})


async def _refusals(app, inc: str) -> list[dict]:
    return [e for e in await audit_entries(app, inc) if e["action"] == "lever.record_refused"]


async def test_undo_of_a_record_with_a_field_its_lever_never_writes_is_refused(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    rec = await lever_store(app.services).get("REQ-1")
    quota = "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota"
    cq = cells.east3.get("clusterqueue", "research-h100")
    now = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    # The undo would test the quota holds what "the lever set" and put back "what it found": 100000 GPUs.
    await _tamper(
        app,
        "REQ-1",
        plan={**rec.plan, "changes": {**rec.plan["changes"], quota: now}},
        pre_state={**rec.pre_state, quota: 100000},
    )
    writes = len(patches(cells.east3))

    out = await say(app, "undo REQ-1", OPS, inc.channel_id)

    assert "not undone" in out and quota in out and "kueue-hold never writes" in out, out
    assert len(patches(cells.east3)) == writes
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(cq, False)
    assert (await lever_store(app.services).get("REQ-1")).state == "done"
    [entry] = await _refusals(app, inc.id)
    assert entry["detail"]["request"] == "REQ-1" and entry["detail"]["during"] == "undo"
    assert quota in entry["detail"]["reason"]
    assert any("REQ-1" in t and "kueue-hold never writes" in t for t in channel_texts(app, inc.channel_id))


async def test_undo_of_a_record_pointed_at_another_object_is_refused(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    rec = await lever_store(app.services).get("REQ-1")
    node = cells.east3.get("node", "gpu-a3-0001")
    # The same fields, but on a Node: the undo's restore would land there.
    await _tamper(app, "REQ-1", plan={**rec.plan, "object_path": NODE})
    writes = len(patches(cells.east3))

    out = await say(app, "undo REQ-1", OPS, inc.channel_id)

    assert "not undone" in out and NODE in out, out
    assert len(patches(cells.east3)) == writes
    assert comparable(cells.east3.get("node", "gpu-a3-0001"), False) == comparable(node, False)
    [entry] = await _refusals(app, inc.id)
    assert NODE in entry["detail"]["reason"]
    assert any("REQ-1" in t and NODE in t for t in channel_texts(app, inc.channel_id))


async def test_undo_of_a_record_whose_provenance_names_another_request_is_refused(app, cells):
    """Each lever writes its own request id: a record claiming another's cannot undo that one's write."""
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    rec = await lever_store(app.services).get("REQ-1")
    changes = {**rec.plan["changes"], "/metadata/annotations/firebreak.io~1request": "REQ-99"}
    await _tamper(app, "REQ-1", plan={**rec.plan, "changes": changes})
    writes = len(patches(cells.east3))

    out = await say(app, "undo REQ-1", OPS, inc.channel_id)

    assert "not undone" in out and "REQ-99" in out, out
    assert len(patches(cells.east3)) == writes


async def test_the_restart_sweep_refuses_a_tampered_in_flight_record(app, cells):
    """The settle puts back what "landed" of a plan cut short: tampered, it would strip a node's GPU label."""
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    rec = await lever_store(app.services).get(rid)
    node = cells.east3.get("node", "gpu-a3-0001")
    await _tamper(
        app,
        rid,
        plan={**rec.plan, "object_path": NODE, "changes": {**rec.plan["changes"], GPU_LABEL: "true"}},
        pre_state={**rec.pre_state, GPU_LABEL: {"$absent": True}},
    )
    writes = len(patches(cells.east3))

    await start_hooks(app)

    assert len(patches(cells.east3)) == writes
    assert comparable(cells.east3.get("node", "gpu-a3-0001"), False) == comparable(node, False)
    [entry] = await _refusals(app, inc.id)
    assert entry["actor"] == "system" and entry["detail"]["during"] == "settle"
    assert (await lever_store(app.services).get(rid)).state == "executing"  # left for a person
    assert any(rid in t and "not settled" in t for t in channel_texts(app, inc.channel_id))
    # Not retried in a loop: the next tick posts nothing more.
    posted = len(channel_texts(app, inc.channel_id))
    await app.tick()
    assert len(channel_texts(app, inc.channel_id)) == posted


async def test_every_lever_s_own_record_passes(app, cells):
    """The bounds are the levers' own: an untampered record of each reversible lever undoes as before."""
    inc = await app.declare(roles={"ops": OPS})
    for text in (
        HOLD,
        "lever jobset-suspend train-llm/pretrain-405b --cell us-east-3",
        "lever node-quarantine gpu-a3-0003 --cell us-east-3 reason=xid79",
        "lever keda-pause serve-chat/llm-70b --cell us-east-3",
        "lever remediation-pause nhc-gpu --cell us-east-3",
    ):
        assert "applied and verified" in await say(app, text, OPS, inc.channel_id), text
    for n in range(1, 6):
        assert "undone" in await say(app, f"undo REQ-{n}", OPS, inc.channel_id)
    assert await _refusals(app, inc.id) == []


async def test_an_approved_request_pointed_at_another_cells_context_is_refused_when_it_runs(app, cells):
    """The permission recheck at execution judges the record's cell; the write goes to its context. A
    Redis writer who re-points a request awaiting approval at another cell's cluster (the same
    ClusterQueue there) gets it refused when the IC's approval runs it, not applied there."""
    inc = await app.declare(cells=("us-east-3", "us-east-1"), roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "needs approval" in out, out
    store = lever_store(app.services)
    await _tamper(app, "REQ-1", context="us-east-1")
    east1, east3 = len(patches(cells.east1)), len(patches(cells.east3))
    assert await store.transition("REQ-1", {"pending_approval"}, "approved", approved_by="U_IC")

    got = await execute_approved(app.services, "REQ-1", "U_IC")

    assert not got.ok and "not applied" in got.message and "us-east-1" in got.message, got.message
    assert (len(patches(cells.east1)), len(patches(cells.east3))) == (east1, east3)
    assert (await store.get("REQ-1")).state == "failed"
    [entry] = await _refusals(app, inc.id)
    assert entry["detail"]["during"] == "apply" and "us-east-1" in entry["detail"]["reason"]
    assert any("REQ-1" in t and "not applied" in t for t in channel_texts(app, inc.channel_id))
