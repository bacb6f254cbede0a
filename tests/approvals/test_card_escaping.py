"""Cluster data on an approval card stays inside its block (issue 24): a value read from the
cluster with a code fence, Slack's control characters and a channel ping in it renders inside the
pre-state's code block, escaped, and pings nobody."""

from __future__ import annotations

import re

from fbworld.kube import samples
from tests.support.approvals import card, request_drain, text_of

CRAFTED = "INC-0```\n*approved by security* <!channel> <https://evil.example|docs> & `x`"


async def test_a_crafted_cluster_value_renders_inside_the_pre_state_block(world):
    cq = samples.cluster_queue()
    # Every lever records the provenance annotations it replaces: this one comes back in the pre-state.
    cq["metadata"].setdefault("annotations", {})["firebreak.io/incident"] = CRAFTED
    world.cell.put(cq)
    rid = await request_drain(world)
    shown = text_of(card(world, rid))
    [block] = [t for t in shown.split("*Pre-state*\n")[1:]]
    # The block opens and closes exactly once, around the whole value: nothing after it renders.
    assert block.startswith("```") and block.count("```") == 2, block
    inside = block[3 : block.rindex("```")]
    assert "/metadata/annotations/firebreak.io/incident" in inside and "*approved by security*" in inside
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in inside
    assert "<https://evil.example" not in shown and "&amp;" in inside
    assert "`" not in inside  # no backtick left to end the block early
    # Every fence on the card is balanced: each block is opened and closed.
    assert len(re.findall("```", shown)) % 2 == 0
