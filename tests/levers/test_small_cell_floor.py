"""The quarantine floor allows at least one node in a small cell: 10% of a 5-node cell is half a node,
which must not round down to "no node may ever be quarantined" (issue 25)."""

from __future__ import annotations

import pytest

from tests.support.levers import OPS, say


@pytest.fixture
def policy_overrides() -> dict:
    return {"node_quarantine": {"per_cell_per_hour": 5, "max_quarantined_fraction": 0.10}}


async def test_a_five_node_cell_may_quarantine_one_node_but_not_two(app, cells):
    for n in cells.east3.list("node")[5:]:  # the seeded cell has 10 GPU nodes: keep 5
        cells.east3.delete("node", n["metadata"]["name"])
    assert len(cells.east3.list("node")) == 5
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever node-quarantine gpu-a3-0000 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    out = await say(app, "lever node-quarantine gpu-a3-0001 reason=xid79", OPS, inc.channel_id)
    assert (
        "Quarantine floor: us-east-3 has 1 of 5 GPU nodes quarantined; gpu-a3-0001 would make it 2 of 5 (40%), "
        "above the policy maximum of 10% (at least one node in any cell)" in out
    ), out
