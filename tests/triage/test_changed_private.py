"""Issue 35 item 2: `changed` in one incident must not show what a private (security) incident did
in the same cell: its lever, target and parameters name which tenant was kill-switched or which
sandbox was cut off. Another private incident's request reads only "a private incident acted in this
cell"; the private incident's own channel still sees its own levers in full."""

from __future__ import annotations

from tests.support.triage import DEGRADED, block_texts, posted, say

OPS = "U0OPS"


async def test_another_private_incidents_lever_is_not_shown_to_a_public_incident(app, cells):
    secret = await app.declare(cells=(DEGRADED,), roles={"ops": OPS}, extra="--private")
    assert secret.private
    pulled = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, secret.channel_id)
    assert "REQ-1 kueue-hold research-h100 (us-east-3)" in pulled, pulled

    # Anyone may declare a public incident in the same cell and ask what changed there.
    public = await app.declare(cells=(DEGRADED,), user="U_MALLORY")
    await say(app, "changed", "U_MALLORY", public.channel_id)
    text = "\n".join(block_texts(posted(app, public.channel_id, f"What changed in the last 6h for {public.id}")))
    assert "research-h100" not in text and "kueue-hold" not in text and "REQ-1" not in text, text
    assert secret.id not in text, text
    assert "• *Firebreak levers*: a private incident acted in this cell (its channel has the details)" in text, text

    # The private incident's own channel sees its own lever in full.
    await say(app, "changed", OPS, secret.channel_id)
    own = "\n".join(block_texts(posted(app, secret.channel_id, f"What changed in the last 6h for {secret.id}")))
    assert f"• *Firebreak levers*: REQ-1 kueue-hold research-h100 ({secret.id}): done" in own, own


async def test_a_private_incident_does_not_see_another_private_incidents_levers(app, cells):
    first = await app.declare(cells=(DEGRADED,), roles={"ops": OPS}, extra="--private")
    assert "REQ-1" in await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, first.channel_id)
    second = await app.declare(cells=(DEGRADED,), extra="--private")
    await say(app, "changed", "U_IC", second.channel_id)
    text = "\n".join(block_texts(posted(app, second.channel_id, f"What changed in the last 6h for {second.id}")))
    assert "research-h100" not in text and first.id not in text, text
    assert "a private incident acted in this cell" in text, text
