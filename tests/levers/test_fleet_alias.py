"""Fleet-wide is decided by the API server a context reaches, not by the context's name
(deploy/overlays/example: contexts `local` and `global` on one server)."""

from __future__ import annotations

import pytest

from fbworld.kube import write_kubeconfig
from tests.support.levers import a_fleet_alias_needs_the_fleet_approval


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
    await a_fleet_alias_needs_the_fleet_approval(app, cells)
