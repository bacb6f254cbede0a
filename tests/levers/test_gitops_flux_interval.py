"""GitOps (issue 34): Flux reapplies what it manages on every spec.interval of its Kustomization
(kustomize.toolkit.fluxcd.io/v1) or HelmRelease (helm.toolkit.fluxcd.io/v2), found by the labels its
controllers set (`<group>/name`, `<group>/namespace`). The plan names that interval and how to suspend
it, and a change still in place after the pull's wait is read again once the interval has passed.

Flux's controllers are not part of the build: the fake cell serves their kinds (upstream group, version,
plural, scope; an open schema) and the test plays Flux's revert."""

from __future__ import annotations

import pytest

from levers.store import lever_store
from tests.support import extra_crds
from tests.support.levers import OPS, channel_texts, say

PULL = "lever kueue-hold research-h100 --cell us-east-3"
KS = {"kustomize.toolkit.fluxcd.io/name": "queues", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
HR = {"helm.toolkit.fluxcd.io/name": "kueue", "helm.toolkit.fluxcd.io/namespace": "flux-system"}


@pytest.fixture
def policy_overrides() -> dict:
    return {"gitops_resync_seconds": 1.5, "api_timeout_seconds": 2}


@pytest.fixture(autouse=True)
def flux_crds(tmp_path_factory, monkeypatch) -> None:
    extra_crds.serve(monkeypatch, tmp_path_factory, extra_crds.FLUX)


def manage(cell, labels: dict, flux: dict) -> None:
    cell.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}})
    cell.put(flux)
    cq = cell.get("clusterqueue", "research-h100")
    cq["metadata"].setdefault("labels", {}).update(labels)
    cell.put(cq)


def kustomization(interval: str) -> dict:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "queues", "namespace": "flux-system"},
        "spec": {
            "interval": interval,
            "path": "./queues",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        },
    }


async def test_the_plan_follows_the_kustomizations_interval(app, cells):
    manage(cells.east3, KS, kustomization("10m"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL + " --dry-run", OPS, inc.channel_id)
    assert (
        "managed by Flux Kustomization flux-system/queues: it may revert this, at its next reconcile, every 600s "
        "(its spec.interval, 10m). Firebreak reads it back again 1.5s after applying; and again when that "
        "interval has passed, 660s after; to keep the change, `flux suspend kustomization queues -n flux-system` "
        "first."
    ) in out, out


async def test_a_revert_at_the_next_interval_is_reported(app, cells):
    manage(cells.east3, KS, kustomization("10m"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "still in place 1.5s later (managed by Flux Kustomization flux-system/queues); Flux reconciles " in out, out
    assert "every 600s: Firebreak reads it again at 03:21 UTC" in out, out
    cq = cells.east3.get("clusterqueue", "research-h100")  # Flux's reconcile: Git's value back
    cq["spec"].pop("stopPolicy", None)
    cells.east3.put(cq)
    app.clock.advance(661)
    await app.tick()
    [again] = [t for t in channel_texts(app, inc.channel_id) if "checked again" in t]
    assert "ended: still NOT verified: reverted, most likely by Flux Kustomization flux-system/queues" in again, again
    assert "`flux suspend kustomization queues -n flux-system`" in again, again
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.result["verified"] is False


async def test_a_helmrelease_without_drift_detection_reverts_nothing_at_its_interval(app, cells):
    hr = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "kueue", "namespace": "flux-system"},
        "spec": {
            "interval": "5m",
            "chart": {"spec": {"chart": "kueue", "sourceRef": {"kind": "HelmRepository", "name": "k"}}},
        },
    }
    manage(cells.east3, HR, hr)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL + " --dry-run", OPS, inc.channel_id)
    assert "managed by Flux HelmRelease flux-system/kueue, which may still revert this later: HelmRelease " in out, out
    assert "has no drift correction (spec.driftDetection.mode is not `enabled`)" in out, out
