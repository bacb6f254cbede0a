"""A refused pull says it was not pulled and nothing changed, and names the missing kube context."""

from __future__ import annotations

import pytest

from fbworld.kube import write_kubeconfig
from tests.support.harness import start_app
from tests.support.levers import OPS, say


@pytest.mark.parametrize("app_settings", [{"kubeconfig": None}], ids=["no-kubeconfig"])
async def test_no_kubeconfig_says_not_pulled_and_names_the_cell(app):
    inc = await app.declare(roles={"ops": OPS})
    key = await app.command("lever kueue-hold research-h100", user=OPS, channel=inc.channel_id)
    assert app.last_ack.strip() == "Planning kueue-hold on research-h100…"  # no promise of a REQ id
    out = await app.reply(key, timeout=15)
    assert out.startswith(
        "Not pulled, nothing changed: Firebreak has no kube config for cell us-east-3 (KUBECONFIG unset)."
    ), out
    assert "Unknown cell" not in out


async def test_route_weight_without_cell_names_the_fleet_context(slack, redis_url, clock, cells, tmp_path):
    # Its own app, not `app`: its kubeconfig names one cell and no fleet context.
    only_cells = write_kubeconfig(tmp_path / "cells-only", {"us-east-3": cells.east3.url})
    app = await start_app(slack, redis_url, clock, kubeconfig=str(only_cells))
    try:
        inc = await app.declare(roles={"ops": OPS})
        out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-3", OPS, inc.channel_id)
        assert out == (
            "Not pulled, nothing changed: no kube context `global` (the fleet context) in KUBECONFIG "
            "(contexts: us-east-3)."
        ), out
        assert cells.fleet.requests == [] and cells.east3.requests == []
    finally:
        await app.stop()


async def test_plan_refusal_says_nothing_changed(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever jobset-suspend pretrain-405b --cell us-east-3", OPS, inc.channel_id)
    assert out.startswith("Not pulled, nothing changed: A JobSet lives in a namespace"), out
