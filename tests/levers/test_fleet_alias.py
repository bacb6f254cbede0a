"""Fleet-wide is decided by the API server a context reaches, not by the context's name
(deploy/overlays/example: contexts `local` and `global` on one server)."""

from __future__ import annotations

import pytest

from fbworld.kube import write_kubeconfig
from levers.store import lever_store
from tests.support.levers import OPS, patches, say


@pytest.fixture
def app_settings(prometheus, cells, tmp_path) -> dict:
    """The example overlay's shape: context `local` names the cell, yet reaches the fleet's API
    server (spelled with a trailing slash, as a kubeconfig may)."""
    kubeconfig = write_kubeconfig(
        tmp_path / "aliased-kubeconfig",
        {"us-east-3": cells.east3.url, "global": cells.fleet.url, "local": cells.fleet.url + "/"},
    )
    return {"kubeconfig": str(kubeconfig), "prometheus_url": prometheus.url}


async def test_a_context_on_the_fleet_server_needs_the_fleet_approval(app, cells):
    inc = await app.declare(cells=("local",), roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global --cell local backend=cell-us-east-1", OPS, inc.channel_id)
    assert "needs approval" in out and "`local` points at the fleet context's API server (`global`)" in out, out
    assert not patches(cells.fleet)
    [rec] = await lever_store(app.services).for_incident(inc.id)
    assert (rec.state, rec.cell, rec.context) == ("pending_approval", "fleet", "local")

    # A context on its own server is a cell like any other: no fleet approval.
    await app.run("scope add us-east-3", user="U_IC", channel=inc.channel_id)
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
