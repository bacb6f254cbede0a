"""A lever on an object Argo CD or Flux manages (issue 25): the plan names the controller ("it may
revert this"), and verify reads the object back again after the resync window
(gitops_resync_seconds), so a revert by the controller is reported, not taken as success."""

from __future__ import annotations

import asyncio

import pytest

from levers.store import lever_store
from tests.support.levers import OPS, say

PULL = "lever kueue-hold research-h100 --cell us-east-3"


@pytest.fixture
def policy_overrides() -> dict:
    return {"gitops_resync_seconds": 1.5, "api_timeout_seconds": 2}


def manage(cell, labels: dict | None = None, annotations: dict | None = None) -> None:
    cq = cell.get("clusterqueue", "research-h100")
    cq["metadata"].setdefault("labels", {}).update(labels or {})
    cq["metadata"].setdefault("annotations", {}).update(annotations or {})
    cell.put(cq)


async def self_heal(cell, after: float = 0.3) -> None:
    """Argo CD's self-heal: the live field drifted from Git, so it syncs Git's value back."""
    for _ in range(200):
        cq = cell.get("clusterqueue", "research-h100")
        if cq["spec"].get("stopPolicy") == "Hold":
            await asyncio.sleep(after)
            cq["spec"]["stopPolicy"] = "None"  # what Git holds (the CRD default)
            cell.put(cq)
            return
        await asyncio.sleep(0.02)


async def test_a_revert_by_argo_cd_is_reported_not_verified(app, cells):
    manage(
        cells.east3,
        annotations={"argocd.argoproj.io/tracking-id": "gpu-queues:kueue.x-k8s.io/ClusterQueue:/research-h100"},
    )
    inc = await app.declare(roles={"ops": OPS})
    healer = asyncio.create_task(self_heal(cells.east3))
    out = await say(app, PULL, OPS, inc.channel_id)
    await healer
    assert "but NOT verified: applied, then reverted within 1.5s, most likely by Argo CD app gpu-queues: " in out, out
    assert "/spec/stopPolicy is 'None' again" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    assert any(n.startswith("managed by Argo CD app gpu-queues: it may revert this.") for n in rec.notes), rec.notes
    assert rec.result["verified"] is False


async def test_a_flux_managed_change_that_holds_is_verified_after_the_window(app, cells):
    manage(
        cells.east3,
        labels={"kustomize.toolkit.fluxcd.io/name": "queues", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
    )
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert (
        "applied and verified (stopPolicy=Hold; still in place 1.5s later "
        "(managed by Flux Kustomization flux-system/queues)" in out
    ), out
    rec = await lever_store(app.services).get("REQ-1")
    assert any("managed by Flux Kustomization flux-system/queues: it may revert this." in n for n in rec.notes)


async def test_an_unmanaged_object_is_not_waited_for(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified (stopPolicy=Hold, rv " in out, out
    assert not (await lever_store(app.services).get("REQ-1")).notes
