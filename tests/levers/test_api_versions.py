"""Kueue's API version is the newest the cell serves: a cell on an older Kueue (v1beta1 only) holds
and undoes a ClusterQueue and stops a JobSet through a v1beta1 Workload; a cell without Kueue says
the type is not served, not that the object is missing."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import OPS, Cells, comparable, kubectl, patches, say

OLD_KUEUE = {"clusterqueues.kueue.x-k8s.io": ["v1beta1"], "workloads.kueue.x-k8s.io": ["v1beta1"]}
NO_KUEUE = {"clusterqueues.kueue.x-k8s.io": [], "workloads.kueue.x-k8s.io": []}
HOLD = "lever kueue-hold research-h100 --cell us-east-3"


def cluster_queue_v1beta1() -> dict:
    """The sample ClusterQueue as Kueue's v1beta1 spells it (spec.cohort, not cohortName)."""
    cq = samples.cluster_queue()
    cq["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    cq["spec"]["cohort"] = cq["spec"].pop("cohortName")
    return cq


@pytest.fixture
def served() -> dict:
    return OLD_KUEUE


@pytest.fixture
async def cells(tmp_path: Path, served: dict) -> AsyncIterator[Cells]:
    """us-east-3 serves Kueue as `served` says (seeded with what it can hold); the others are stock."""
    east3 = FakeKubeCluster("us-east-3", served=served)
    east1, fleet = FakeKubeCluster("us-east-1"), FakeKubeCluster("global")
    for c in (east3, east1, fleet):
        await c.start()
    if served.get("clusterqueues.kueue.x-k8s.io"):
        east3.put(cluster_queue_v1beta1())
    east3.put(samples.kueue_jobset())
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"us-east-3": east3.url, "us-east-1": east1.url, "global": fleet.url}
    )
    yield Cells(east3, east1, fleet, kubeconfig)
    for c in (east3, east1, fleet):
        await c.stop()


async def test_a_v1beta1_only_cell_holds_and_undoes(app, cells):
    cell = cells.east3
    original = cell.get("clusterqueue", "research-h100")
    assert original["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    inc = await app.declare(roles={"ops": OPS})

    dry = await say(app, HOLD + " --dry-run", OPS, inc.channel_id)
    assert "PATCH /apis/kueue.x-k8s.io/v1beta1/clusterqueues/research-h100" in dry, dry
    planned = await lever_store(app.services).get("REQ-1")
    # kubectl resolves clusterqueues.kueue.x-k8s.io through discovery too (v1beta1 here).
    argv = shlex.split(planned.plan["kubectl"], comments=True)
    await kubectl(cells.kubeconfig, "us-east-3", *argv[3:])
    reference = comparable(cell.get("clusterqueue", "research-h100"))
    assert reference["spec"]["stopPolicy"] == "Hold"
    cell.put(original)
    original = cell.get("clusterqueue", "research-h100")
    cell.requests.clear()

    out = await say(app, HOLD, OPS, inc.channel_id)
    assert out.startswith("REQ-2 kueue-hold research-h100 (us-east-3): applied and verified (stopPolicy=Hold"), out
    assert [r.path for r in patches(cell)] == ["/apis/kueue.x-k8s.io/v1beta1/clusterqueues/research-h100"]
    assert comparable(cell.get("clusterqueue", "research-h100")) == reference

    undo = await app.run("undo REQ-2", user=OPS, channel=inc.channel_id)
    assert "REQ-2 kueue-hold" in undo and "undone" in undo and "verified" in undo, undo
    assert comparable(cell.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_a_v1beta1_only_cell_stops_a_kueue_jobset_through_a_v1beta1_workload(app, cells):
    cell = cells.east3
    cell.start_controller("kueue", interval=0.1)
    for _ in range(60):
        wls = cell.list("workloads", "train-llm")
        if wls:
            break
        await asyncio.sleep(0.05)
    [wl] = wls
    name = wl["metadata"]["name"]
    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()

    out = await say(app, "lever jobset-suspend train-llm/pretrain-405b --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified (stopped through Workload train-llm/" in out, out
    assert [r.path for r in patches(cell)] == [f"/apis/kueue.x-k8s.io/v1beta1/namespaces/train-llm/workloads/{name}"]
    assert cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is True

    undo = await app.run("undo REQ-1", user=OPS, channel=inc.channel_id)
    assert "undone" in undo and "verified" in undo, undo
    assert cell.get("workload", name, "train-llm")["spec"]["active"] is True


@pytest.mark.parametrize("served", [NO_KUEUE])
async def test_a_cell_without_kueue_says_not_served_not_not_found(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.requests.clear()

    out = await say(app, HOLD, OPS, inc.channel_id)
    assert out.startswith("Not pulled, nothing changed: "), out
    assert "ClusterQueue (kueue.x-k8s.io) is not served by this cluster" in out, out
    assert "not found" not in out, out
    assert not patches(cells.east3)
    actions = [e["action"] for e in await audit_entries(app, inc.id)]
    assert "command.lever" in actions, actions

    # A JobSet labelled for a Kueue queue, in a cell that has no Kueue: refused, not suspended bare.
    out = await say(app, "lever jobset-suspend train-llm/pretrain-405b --cell us-east-3", OPS, inc.channel_id)
    assert "not pulled, nothing changed" in out, out
    assert "serves no Kueue Workload API (v1beta2, v1beta1)" in out, out
    assert not patches(cells.east3)
    assert cells.east3.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is False
