"""A cluster is known by what it is, not by how its URL is spelled (issue 35, item 11): a context that
reaches the fleet's API server by another name (localhost for 127.0.0.1, as kubernetes.default.svc and
its .svc.cluster.local spelling, the service IP or a trailing dot would) is the fleet, and its levers need
the fleet's approval. The identity is the kube-system namespace's uid, read once per context."""

from __future__ import annotations

import pytest

from fbworld.kube import write_kubeconfig
from tests.support.levers import OPS, a_fleet_alias_needs_the_fleet_approval, say

KUBE_SYSTEM = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}


@pytest.fixture
def app_settings(prometheus, cells, tmp_path) -> dict:
    """Context `local` reaches the fleet's server as `localhost`, `global` as 127.0.0.1."""
    assert "127.0.0.1" in cells.fleet.url
    kubeconfig = write_kubeconfig(
        tmp_path / "respelled-kubeconfig",
        {
            "us-east-3": cells.east3.url,
            "global": cells.fleet.url,
            "local": cells.fleet.url.replace("127.0.0.1", "localhost"),
        },
    )
    for c in (cells.east3, cells.fleet):
        c.put(dict(KUBE_SYSTEM))  # each its own uid, as every cluster has
    return {"kubeconfig": str(kubeconfig), "prometheus_url": prometheus.url}


async def test_a_context_on_the_fleet_by_another_name_needs_the_fleet_approval(app, cells):
    inc = await a_fleet_alias_needs_the_fleet_approval(app, cells)

    # Read once per context: more pulls ask nothing more.
    reads = len(cells.fleet.find_requests("GET", r"^/api/v1/namespaces/kube-system$"))
    assert reads == 2  # once through `local`, once through `global`
    await say(app, "lever route-weight edge/chat-global --cell local backend=cell-us-east-1", OPS, inc.channel_id)
    await say(app, "lever kueue-hold research-h100 --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert len(cells.fleet.find_requests("GET", r"^/api/v1/namespaces/kube-system$")) == reads
    assert len(cells.east3.find_requests("GET", r"^/api/v1/namespaces/kube-system$")) == 1
