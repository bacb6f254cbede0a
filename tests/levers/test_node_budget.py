"""node-quarantine budgets: quarantines per cell per hour and the minHealthy floor, refused with the
numbers before anything is written; dry-runs consume nothing; one retry on a resourceVersion conflict."""

from __future__ import annotations

import asyncio

import pytest

from levers.store import lever_store
from tests.support.harness import MODES
from tests.support.levers import OPS, patches, say

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


@pytest.fixture
def policy_overrides() -> dict:
    return {"node_quarantine": {"per_cell_per_hour": 2, "max_quarantined_fraction": 0.2}}


def quarantined(cell) -> list[str]:
    return sorted(
        n["metadata"]["name"]
        for n in cell.list("node")
        if any(t["key"] == "gpu.corp/quarantine" for t in n["spec"].get("taints", []))
    )


async def test_rate_budget_per_cell_per_hour(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    for i in range(3):  # dry-runs check but consume nothing
        out = await say(app, f"lever node-quarantine gpu-a3-000{i} reason=xid79 --dry-run", OPS, ch)
        assert "(dry run)" in out, out
    for i in range(2):
        out = await say(app, f"lever node-quarantine gpu-a3-000{i} reason=xid79", OPS, ch)
        assert "applied and verified" in out, out
    out = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, ch)
    assert (
        "Quarantine budget: us-east-3 already had 2 node quarantine(s) in the last hour; "
        "the budget is 2 per hour" in out
    ), out
    assert quarantined(cells.east3) == ["gpu-a3-0000", "gpu-a3-0001"]
    # Undo does not hand the budget back (it counts quarantines, not quarantined nodes) ...
    await say(app, "undo REQ-4", OPS, ch)
    assert "Quarantine budget" in await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, ch)
    clock.advance(3601)  # ... the hour does
    out = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, ch)
    assert "applied and verified" in out, out


async def test_min_healthy_floor(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    for i in range(2):
        assert "applied" in await say(app, f"lever node-quarantine gpu-a3-000{i} reason=xid79", OPS, ch)
        clock.advance(3601)
    writes = len(patches(cells.east3))
    out = await say(app, "lever node-quarantine gpu-a3-0005 reason=xid79", OPS, ch)
    assert (
        "Quarantine floor: us-east-3 has 2 of 10 GPU nodes quarantined; gpu-a3-0005 would make it 3 of 10 "
        "(30%), above the policy maximum of 20%" in out
    ), out
    assert len(patches(cells.east3)) == writes
    # Re-quarantining a node that is already out doesn't move the fraction.
    out = await say(app, "lever node-quarantine gpu-a3-0001 reason=nccl-hang", OPS, ch)
    assert "applied and verified" in out, out
    node = cells.east3.get("node", "gpu-a3-0001")
    assert node["spec"]["taints"] == [
        {"key": "gpu.corp/quarantine", "value": "nccl-hang", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},  # the GPU pool's own taint
    ]
    assert node["metadata"]["labels"]["gpu.corp/quarantine-ticket"] == inc.id  # ticket defaults to the incident


async def test_conflict_retries_once_with_the_new_resource_version(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.fail_next("PATCH", r"/nodes/gpu-a3-0003$", 409)
    out = await say(app, "lever node-quarantine gpu-a3-0003 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    first, second = cells.east3.find_requests("PATCH", r"/nodes/gpu-a3-0003$")
    assert (first.status, second.status) == (409, 200)
    assert first.body["metadata"]["resourceVersion"] and second.body["metadata"]["resourceVersion"]
    assert first.body["spec"] == second.body["spec"]


async def test_budget_override_asks_the_ic_and_runs_once_approved(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    for i in range(2):
        assert "applied" in await say(app, f"lever node-quarantine gpu-a3-000{i} reason=xid79", OPS, ch)
    refused = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, ch)
    assert "Quarantine budget" in refused and "override=budget" in refused, refused
    writes = len(patches(cells.east3))

    asked = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79 override=budget", OPS, ch)
    rid = asked.split()[0] if asked.startswith("REQ-") else next(w for w in asked.split() if w.startswith("REQ-"))
    rid = rid.rstrip(":,.")
    rec = await lever_store(app.services).get(rid)
    assert rec.state == "pending_approval" and rec.budget_override, asked
    assert any(r.startswith("budget override: Quarantine budget") for r in rec.needs_approval)
    assert len(patches(cells.east3)) == writes  # nothing written while it waits
    card = await app.slack.wait_for(lambda c: c.method == "chat.postMessage" and rid in str(c.args.get("blocks")))
    assert "budget override" in str(card.args["blocks"])

    # The requester cannot approve their own override; the IC can.
    own = await app.reply(await app.press("lever.approve", rid, user=OPS, channel=ch))
    assert f"You asked for {rid}, so you cannot decide it" in own
    await app.reply(await app.press("lever.approve", rid, user="U_IC", channel=ch), timeout=10)
    await app.drain()
    assert (await lever_store(app.services).get(rid)).state == "done"
    assert quarantined(cells.east3) == ["gpu-a3-0000", "gpu-a3-0001", "gpu-a3-0002"]
    # An approved override still counts: the hour's budget is now 3 used of 2.
    out = await say(app, "lever node-quarantine gpu-a3-0003 reason=xid79", OPS, ch)
    assert "already had 3 node quarantine(s)" in out, out


async def test_override_takes_only_budget(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79 override=all", OPS, inc.channel_id)
    assert "override= takes `budget`" in out and "Usage" in out, out
    assert patches(cells.east3) == []


async def test_concurrent_quarantines_cannot_both_squeeze_under_the_floor(app, cells, clock):
    """1 of 10 out, floor 20%: two pulls race for the one place left. Both plan from a listing that
    shows one node out (their PATCHes are held back), so only the atomic reservation can stop the
    second."""
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    assert "applied" in await say(app, "lever node-quarantine gpu-a3-0000 reason=xid79", OPS, ch)
    clock.advance(3601)  # a fresh hour: the rate budget (2) allows both; only the floor decides
    cells.east3.delay_next("PATCH", r"/nodes/gpu-a3-000[12]$", seconds=0.5, times=2)
    outs = await asyncio.gather(
        say(app, "lever node-quarantine gpu-a3-0001 reason=xid79", OPS, ch),
        say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, ch),
    )
    applied = [o for o in outs if "applied and verified" in o]
    refused = [o for o in outs if "Quarantine floor" in o]
    assert len(applied) == 1 and len(refused) == 1, outs
    assert (
        "us-east-3 has 2 of 10 GPU nodes quarantined; " in refused[0]
        and "would make it 3 of 10 (30%), above the policy maximum of 20%" in refused[0]
    ), refused
    assert "nothing changed" in refused[0]
    assert len(quarantined(cells.east3)) == 2
    # The refused pull gave its hour's slot back; the applied one holds its floor place until undone.
    loser = refused[0].split()[0]
    assert (await lever_store(app.services).get(loser)).state == "failed"
    winner = applied[0].split()[0]
    assert "undone" in await say(app, f"undo {winner}", OPS, ch)
    assert "applied and verified" in await say(app, "lever node-quarantine gpu-a3-0003 reason=xid79", OPS, ch)
