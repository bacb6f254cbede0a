"""The fake's opt-in Kueue and Argo Rollouts controllers react the way the real ones do to what the
levers write (over real HTTPS, through kubernetes_asyncio and kubectl)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import pytest_asyncio
from kube_support import (
    MERGE,
    kubectl,
    needs_kubectl,
)
from kubernetes_asyncio import client, config

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from fbworld.kube.controllers import workload_name

WL = ("kueue.x-k8s.io", "v1beta2", "train-llm", "workloads")
JS = ("jobset.x-k8s.io", "v1alpha2", "train-llm", "jobsets")
RO = ("argoproj.io", "v1alpha1", "serve-chat", "rollouts")


async def eventually(check: Callable[[], object], timeout: float = 3.0) -> object:
    """Poll `check` until it returns something truthy; fail with its last value after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached in {timeout}s (last value {value!r})")
        await asyncio.sleep(0.02)


def cond(obj: dict, ctype: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == ctype)


def brief(c: dict) -> tuple[str, str, str]:
    return c["status"], c["reason"], c["message"]


@pytest_asyncio.fixture
async def cell():
    c = FakeKubeCluster("cell-us-east-3")
    await c.start()
    c.put(samples.cluster_queue())
    yield c
    await c.stop()


@pytest_asyncio.fixture
async def kubeconfig(cell, tmp_path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", {cell.name: cell.url})


@pytest_asyncio.fixture
async def co(cell, kubeconfig):
    ac = await config.new_client_from_config(config_file=str(kubeconfig), context=cell.name)
    yield client.CustomObjectsApi(ac)
    await ac.close()


def test_workload_names_match_kueues_own_test_vectors():
    # kueue v0.19.2 pkg/controller/jobframework/workload_names_test.go (ShortWorkloadNames=false)
    assert workload_name("name", "uid", "Job", "batch") == "job-name-ef3a1"
    long = (
        "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-"
        "social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-"
        "senior-architect-validation-checked-approved-by-legal-and-ops-dept"
    )
    got = workload_name(long, "uid", "Job", "batch")
    assert got.endswith("-approved-by-l-218b8") and len(got) == 253


# ----------------------------------------------------------------------- Kueue


def workloads(cell: FakeKubeCluster) -> list[dict]:
    return cell.list("workload", "train-llm")


@pytest.mark.asyncio
async def test_kueue_admits_a_queued_jobset_through_a_workload_it_owns(cell):
    js = cell.put(samples.kueue_jobset(suspend=True))  # as Kueue's webhook leaves a new job
    plain = cell.put(samples.jobset(name="no-queue"))
    ctl = cell.start_controller("kueue", interval=0.02)
    await eventually(lambda: cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is False)
    [wl] = workloads(cell)  # none for the JobSet without a queue label
    assert wl["metadata"]["name"] == workload_name("pretrain-405b", js["metadata"]["uid"])
    assert wl["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "pretrain-405b",
            "uid": js["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": js["metadata"]["uid"]}
    assert wl["spec"]["active"] is True  # unset by Kueue, defaulted by the CRD
    assert wl["spec"]["queueName"] == "research"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("workers", 64)]
    assert brief(cond(wl, "QuotaReserved")) == ("True", "QuotaReserved", "Quota reserved in ClusterQueue research-h100")
    assert brief(cond(wl, "Admitted")) == ("True", "Admitted", "The workload is admitted")
    assert wl["status"]["admission"]["clusterQueue"] == "research-h100"
    # The sample builds the same object the controller does.
    expected = samples.workload_for(js)
    assert wl["metadata"]["name"] == expected["metadata"]["name"]
    assert wl["metadata"]["ownerReferences"] == expected["metadata"]["ownerReferences"]
    assert [(p["name"], p["count"], p["template"]) for p in wl["spec"]["podSets"]] == [
        (p["name"], p["count"], p["template"]) for p in expected["spec"]["podSets"]
    ]
    managers = {e["manager"] for e in cell.get("jobset", "pretrain-405b", "train-llm")["metadata"]["managedFields"]}
    assert managers == {"manager"}  # Kueue's own write unsuspended it
    assert cell.get("jobset", "no-queue", "train-llm") == plain
    assert ctl.passes > 0


@pytest.mark.asyncio
async def test_an_admitted_jobset_suspended_directly_is_resumed_by_kueue(cell, co):
    cell.put(samples.kueue_jobset())
    cell.start_controller("kueue", interval=0.02)
    await eventually(lambda: workloads(cell))
    await co.patch_namespaced_custom_object(*JS, "pretrain-405b", {"spec": {"suspend": True}}, _content_type=MERGE)
    # Kueue re-admission: the workload is still active and admitted, so the job runs again.
    await eventually(lambda: cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is False)


@pytest.mark.asyncio
async def test_deactivating_the_workload_stops_the_jobset_until_it_is_reactivated(cell, co):
    cell.put(samples.kueue_jobset())
    cell.start_controller("kueue", interval=0.02)
    [wl] = await eventually(lambda: workloads(cell))
    name = wl["metadata"]["name"]
    await co.patch_namespaced_custom_object(*WL, name, {"spec": {"active": False}}, _content_type=MERGE)
    await eventually(lambda: cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is True)
    await eventually(lambda: cond(cell.get("workload", name, "train-llm"), "QuotaReserved")["status"] == "False")
    await asyncio.sleep(0.3)  # many reconciles later it is still stopped
    assert cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is True
    wl = cell.get("workload", name, "train-llm")
    assert brief(cond(wl, "Evicted")) == ("True", "Deactivated", "The workload is deactivated")
    assert brief(cond(wl, "QuotaReserved")) == ("False", "Pending", "The workload is deactivated")
    assert brief(cond(wl, "Admitted")) == ("False", "NoReservation", "The workload has no reservation")
    assert brief(cond(wl, "Requeued")) == ("False", "Deactivated", "The workload is deactivated")
    assert "admission" not in wl["status"]

    await co.patch_namespaced_custom_object(*WL, name, {"spec": {"active": True}}, _content_type=MERGE)
    await eventually(lambda: cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is False)
    wl = cell.get("workload", name, "train-llm")
    assert brief(cond(wl, "Admitted")) == ("True", "Admitted", "The workload is admitted")
    assert brief(cond(wl, "Evicted")) == ("False", "QuotaReserved", "Previously: The workload is deactivated")
    assert brief(cond(wl, "Requeued")) == ("True", "Reactivated", "The workload was reactivated")


@pytest.mark.asyncio
async def test_kueue_on_a_v1beta1_only_cluster_writes_v1beta1_workloads():
    async with FakeKubeCluster("old", served={"workloads.kueue.x-k8s.io": ["v1beta1"]}) as c:
        c.put(samples.kueue_jobset())
        c.start_controller("kueue", interval=0.02)
        [wl] = await eventually(lambda: c.list("workload", "train-llm"))
        assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        assert cond(wl, "Admitted")["status"] == "True"


@pytest.mark.asyncio
async def test_the_workload_goes_with_its_jobset(cell):
    cell.put(samples.kueue_jobset())
    cell.start_controller("kueue", interval=0.02)
    await eventually(lambda: workloads(cell))
    cell.delete("jobset", "pretrain-405b", "train-llm")
    await eventually(lambda: not workloads(cell))


@pytest.mark.asyncio
async def test_a_crashed_controller_fails_the_test_at_stop():
    c = FakeKubeCluster("c")
    await c.start()
    ctl = c.start_controller("kueue", interval=0.02)

    def broken() -> None:
        raise RuntimeError("reconcile bug")

    ctl.reconcile = broken  # type: ignore[method-assign]
    await asyncio.sleep(0.1)
    with pytest.raises(RuntimeError, match="reconcile bug"):
        await c.stop()
    with pytest.raises(ValueError, match="unknown controller"):
        c.start_controller("flux")


# ------------------------------------------------------------------------ Argo


def seed_rollout(cell: FakeKubeCluster, ro: dict) -> dict:
    stored = cell.put(ro)
    for rs in samples.rollout_replica_sets(stored):
        cell.put(rs)
    return stored


def rs(cell: FakeKubeCluster, name: str) -> tuple[int, int]:
    obj = cell.get("rs", name, "serve-chat")
    return obj["spec"]["replicas"], obj["status"]["availableReplicas"]


@needs_kubectl
@pytest.mark.asyncio
async def test_argo_aborts_a_basic_canary(cell, kubeconfig):
    seed_rollout(cell, samples.rollout_canary(traffic_routing=False))
    cell.start_controller("argo", interval=0.02)
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "patch", "rollout", "llm-13b", "-n", "serve-chat", "--subresource=status",
        "--type=merge", "-p", '{"status":{"abort":true}}',
    )  # fmt: skip
    assert rc == 0, err
    ro = await eventually(
        lambda: (r := cell.get("rollout", "llm-13b", "serve-chat"))["status"]["phase"] == "Degraded" and r
    )
    st = ro["status"]
    assert st["message"] == "RolloutAborted: Rollout aborted update to revision 2"
    assert st["abort"] is True and st["abortedAt"]
    progressing = cond(ro, "Progressing")
    assert brief(progressing) == ("False", "RolloutAborted", "Rollout aborted update to revision 2")
    assert "pauseConditions" not in st and st["currentStepIndex"] == 0
    assert "canary" not in st  # no traffic router, no weights
    assert rs(cell, "llm-13b-7b8c9d6f4") == (0, 0)  # the canary's pods are gone
    assert rs(cell, "llm-13b-6d9f7c8b5") == (4, 4)  # stable back to full size
    assert (st["replicas"], st["updatedReplicas"], st["availableReplicas"]) == (4, 0, 4)
    managers = {e["manager"] for e in ro["metadata"]["managedFields"]}
    assert managers == {"kubectl-patch", "rollouts-controller"}
    aborted_at = st["abortedAt"]
    await asyncio.sleep(0.1)  # later passes keep the original abortedAt and write nothing
    assert cell.get("rollout", "llm-13b", "serve-chat")["status"]["abortedAt"] == aborted_at


@pytest.mark.asyncio
async def test_argo_aborts_a_traffic_routed_canary_back_to_stable_weight_100(cell, co):
    seed_rollout(cell, samples.rollout_canary(traffic_routing=True))
    cell.start_controller("argo", interval=0.02)
    await co.patch_namespaced_custom_object_status(*RO, "llm-13b", {"status": {"abort": True}}, _content_type=MERGE)
    ro = await eventually(
        lambda: (r := cell.get("rollout", "llm-13b", "serve-chat"))["status"]["phase"] == "Degraded" and r
    )
    assert ro["status"]["canary"]["weights"] == {
        "canary": {"weight": 0, "podTemplateHash": "7b8c9d6f4", "serviceName": "llm-13b-canary"},
        "stable": {"weight": 100, "podTemplateHash": "6d9f7c8b5", "serviceName": "llm-13b-stable"},
    }
    assert rs(cell, "llm-13b-6d9f7c8b5") == (4, 4)


@pytest.mark.asyncio
async def test_argo_aborts_a_blue_green_rollout_back_to_the_stable_selector(cell, co):
    ro = seed_rollout(cell, samples.rollout_bluegreen())
    assert ro["status"]["blueGreen"]["activeSelector"] == ro["status"]["stableRS"]
    # Promotion had begun: the active service already selects the new ReplicaSet.
    await co.patch_namespaced_custom_object_status(
        *RO, "llm-embed", {"status": {"blueGreen": {"activeSelector": "8c7b6d5f4"}}}, _content_type=MERGE
    )
    cell.start_controller("argo", interval=0.02)
    await co.patch_namespaced_custom_object_status(*RO, "llm-embed", {"status": {"abort": True}}, _content_type=MERGE)
    ro = await eventually(
        lambda: (r := cell.get("rollout", "llm-embed", "serve-chat"))["status"]["phase"] == "Degraded" and r
    )
    assert ro["status"]["blueGreen"]["activeSelector"] == ro["status"]["stableRS"] == "5f6d7c8b9"
    assert ro["status"]["message"] == "RolloutAborted: Rollout aborted update to revision 2"
    assert rs(cell, "llm-embed-5f6d7c8b9") == (3, 3)


@pytest.mark.asyncio
async def test_argo_leaves_a_rollout_that_is_not_aborted_alone(cell):
    seed_rollout(cell, samples.rollout_canary())
    before = cell.get("rollout", "llm-13b", "serve-chat")
    ctl = cell.start_controller("argo", interval=0.02)
    await eventually(lambda: ctl.passes >= 3)
    assert cell.get("rollout", "llm-13b", "serve-chat") == before
