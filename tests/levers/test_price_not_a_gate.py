"""A price is not a gate (docs/levers.md, "Price"): a Kubernetes error while reading it is said in
the price, and the pull goes on. It is read once per plan.

The cell serves Kueue's ClusterQueue as v1beta2 and its Workload as v1beta1 only (a CRD upgraded
before the other), so kueue-hold-drain's price is the first to ask discovery for v1beta1, and that
discovery request is refused (403: not retried, so one read is one request)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from levers.store import lever_store
from tests.support.levers import OPS, Cells, say

WORKLOADS_V1BETA1 = r"^/apis/kueue\.x-k8s\.io/v1beta1$"


@pytest.fixture
async def cells(tmp_path: Path) -> AsyncIterator[Cells]:
    east3 = FakeKubeCluster("us-east-3", served={"workloads.kueue.x-k8s.io": ["v1beta1"]})
    east1, fleet = FakeKubeCluster("us-east-1"), FakeKubeCluster("global")
    for c in (east3, east1, fleet):
        await c.start()
    east3.put(samples.cluster_queue())
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"us-east-3": east3.url, "us-east-1": east1.url, "global": fleet.url}
    )
    yield Cells(east3, east1, fleet, kubeconfig)
    for c in (east3, east1, fleet):
        await c.stop()


async def test_a_kubernetes_error_while_pricing_is_said_in_the_price_and_the_pull_asks(app, cells):
    cells.east3.fail_next("GET", WORKLOADS_V1BETA1, 403, message="discovery denied")
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "REQ-1 kueue-hold-drain research-h100 (us-east-3) needs approval" in out, out
    assert "nothing has changed yet" in out and "could not plan" not in out, out
    assert "• the price could not be read: " in out and "discovery denied" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    assert rec is not None and rec.state == "pending_approval", rec
    # Read once: a second read would have asked discovery again (a failed answer is not cached).
    asked = [r for r in cells.east3.requests if r.method == "GET" and r.path == "/apis/kueue.x-k8s.io/v1beta1"]
    assert len(asked) == 1, [r.path for r in cells.east3.requests]
