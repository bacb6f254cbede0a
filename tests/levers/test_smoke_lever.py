from tests.support.harness import audit_entries
from tests.support.levers import OPS, channel_texts, comparable, patches


async def test_kueue_hold_applies_verifies_and_undoes(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    before = cells.east3.get("clusterqueue", "research-h100")
    out = await app.run("lever kueue-hold research-h100 --cell us-east-3", user=OPS, channel=inc.channel_id)
    assert "REQ-1 kueue-hold research-h100 (us-east-3): applied and verified (stopPolicy=Hold" in out, out
    after = cells.east3.get("clusterqueue", "research-h100")
    assert after["spec"]["stopPolicy"] == "Hold"
    assert after["metadata"]["annotations"] == {"firebreak.io/request": "REQ-1", "firebreak.io/incident": inc.id}
    assert any("REQ-1" in t and "applied and verified" in t for t in channel_texts(app, inc.channel_id))
    out = await app.run("undo REQ-1", user=OPS, channel=inc.channel_id)
    assert "undone" in out, out
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(before, False)
    actions = [e["action"] for e in await audit_entries(app, inc.id)]
    assert "lever.apply" in actions and "lever.done" in actions and "lever.undo" in actions
    assert len(patches(cells.east3)) == 2
