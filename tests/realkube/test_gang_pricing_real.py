"""GPU-hours prices on the real kube-apiserver with the real JobSet and Kueue controllers (levers/gangs.py):
progress runs from the later of the last checkpoint and the gang's last start or restart, and a pod's
gang is found through its owner chain whatever kind the gang is.

No kube-controller-manager runs, so no Job controller, kubelet or garbage collector: the test writes
what they would (a Job's status.startTime and Failed condition, a pod's Running phase and startTime,
the removal of the foreground-deletion finalizer once a Job has no pods). Everything else is the
controllers' own: the JobSet controller's restart (status.restarts, its Jobs deleted and made again
with the jobset.sigs.k8s.io/restart-attempt label), Kueue's Workload for a plain Job (owner reference
and job-uid label, admission, unsuspending the Job).

The prices are read as admin: the lever's RBAC is tests/deploy's and test_levers_live's business.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.clock import iso
from fbworld.kube import samples
from levers import gangs
from levers.base import Ctx, NoParams, Target
from levers.kube import Kube
from levers.price import Cost
from tests.realkube.test_kueue_real import JOB_UID, WL, Queues, is_true, queues  # noqa: F401 (fixture)
from tests.support.harness import T0
from tests.support.jobset_controller import NAME_LABEL, JobSetController, jobs_of
from tests.support.kube_apiserver import ADMIN_CONTEXT, KubeAPIServer, until_read
from tests.support.kueue_controller import KueueController
from tests.support.levers import OPS

NS = "realkube-gangs"
JS = "jobset.jobset.x-k8s.io"
CHECKPOINT = "training.corp/last-checkpoint"  # the policy's default checkpoint_annotation
RESTART = "jobset.sigs.k8s.io/restart-attempt"
GPU = "nvidia.com/gpu"
MIN = 60.0


async def until(read, ok, what: str = "") -> Any:
    return await until_read(read, ok, what, seconds=60.0, every=0.2)


@pytest.fixture
async def admin(app, kube_apiserver: KubeAPIServer) -> AsyncIterator[Kube]:
    kube = Kube(kube_apiserver.admin_kubeconfig, 10)
    yield kube
    await kube.close()


async def ctx_of(app, kube: Kube, ns: str) -> Ctx:
    """A lever's context on the admin client: the app's policy (checkpoint annotation) and clock (T0)."""
    return Ctx(
        svc=app.services,
        kube=await kube.client(ADMIN_CONTEXT),
        req_id="REQ-0",
        incident="INC-0",
        cell="us-east-3",
        context=ADMIN_CONTEXT,
        target=Target(ns, "x"),
        params=NoParams(),
        requester=OPS,
    )


def status(s: KubeAPIServer, resource: str, ns: str, name: str, body: dict) -> None:
    s.kubectl(
        "patch", resource, name, "-n", ns, "--subresource", "status", "--type", "merge",
        "-p", json.dumps({"status": body}),
    )  # fmt: skip


def start_job(s: KubeAPIServer, ns: str, job: dict, at: float) -> None:
    """What the Job controller writes when it starts (or resumes) a Job."""
    status(s, "job", ns, job["metadata"]["name"], {"startTime": iso(at), "active": job["spec"].get("parallelism", 1)})


def fail_job(s: KubeAPIServer, ns: str, job: dict, started: float) -> None:
    """What the Job controller writes when a pod fails past backoffLimit (0): FailureTarget, then Failed."""
    now = iso(T0)
    reason = {"reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": now, **reason}
        for t in ("FailureTarget", "Failed")
    ]
    body = {"startTime": iso(started), "failed": 1, "active": 0, "conditions": conditions}
    status(s, "job", ns, job["metadata"]["name"], body)


def run_pod(s: KubeAPIServer, ns: str, name: str, owner: dict, node: str, started: float, gpus: int = 8) -> dict:
    """A pod `owner` made, bound to `node`, that the kubelet reports Running since `started`."""
    meta = owner["metadata"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "registry.invalid/t:1", "resources": {"limits": {GPU: gpus}}}],
        },
    }
    s.apply(pod)
    status(s, "pod", ns, name, {"phase": "Running", "startTime": iso(started)})
    return pod


def delete_pods(s: KubeAPIServer, ns: str, *names: str) -> None:
    """Pods bound to a node wait for its kubelet to confirm their deletion: none runs here."""
    s.kubectl("delete", "pod", *names, "-n", ns, "--ignore-not-found", "--force", "--grace-period=0")


async def on_node(ctx: Ctx, ns: str, node: str) -> list[dict]:
    return await ctx.kube.list_all(f"/api/v1/namespaces/{ns}/pods", {"fieldSelector": f"spec.nodeName={node}"})


def by_unit(costs: list[Cost], what: str) -> tuple[Cost, Cost]:
    mine = {c.unit: c for c in costs if c.what == what}
    assert set(mine) == {"GPU-hours", "GPUs"}, costs
    return mine["GPU-hours"], mine["GPUs"]


async def test_a_jobset_restart_prices_from_the_restart_not_the_older_checkpoint(
    app, admin: Kube, kube_apiserver: KubeAPIServer, jobset_controller: JobSetController
):
    s, name = kube_apiserver, "restarts"
    await asyncio.to_thread(s.namespace, NS)
    js = samples.jobset(NS, name)
    js["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 40 * MIN)}
    js["spec"]["failurePolicy"] = {"maxRestarts": 3}
    rj = js["spec"]["replicatedJobs"][0]
    rj["replicas"] = 2
    rj["template"]["spec"].update(parallelism=1, completions=1)  # 2 Jobs of one 8-GPU pod: 16 GPUs
    await asyncio.to_thread(s.apply, js)
    try:
        ctx = await ctx_of(app, admin, NS)
        jobs = await until(lambda: jobs_of(s, NS, name), lambda j: len(j) == 2, "the JobSet's 2 Jobs")
        for job in jobs:
            await asyncio.to_thread(start_job, s, NS, job, T0 - 60 * MIN)
        got = await asyncio.to_thread(s.get, JS, name, NS)
        hours, gpus = by_unit(await gangs.gang_costs(ctx, got, None), f"JobSet {NS}/{name}")
        # Started an hour ago, checkpointed 40 min ago: 40 min of progress.
        assert gpus.value == 16 and hours.value == pytest.approx(16 * 40 / 60), hours
        assert hours.how == "16 GPUs x 40 min since the last checkpoint (annotation training.corp/last-checkpoint)"

        # One Job fails: the JobSet controller restarts the gang (status.restarts 1), deleting its Jobs
        # with foreground propagation and making them again once they are gone.
        await asyncio.to_thread(fail_job, s, NS, jobs[0], T0 - 60 * MIN)
        await until(lambda: s.get(JS, name, NS), lambda o: o.get("status", {}).get("restarts") == 1, "restarts 1")
        old = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:  # the garbage collector's part: no pods depend on them, so the finalizer goes
            await asyncio.to_thread(
                s.kubectl_result, "patch", "job", job["metadata"]["name"], "-n", NS, "--type", "merge",
                "-p", '{"metadata":{"finalizers":null}}',
            )  # fmt: skip
        new = await until(
            lambda: jobs_of(s, NS, name),
            lambda js: len(js) == 2 and all(j["metadata"]["uid"] not in old for j in js),
            "the Jobs of restart 1",
        )
        assert {j["metadata"]["labels"][RESTART] for j in new} == {"1"}
        for job in new:
            await asyncio.to_thread(start_job, s, NS, job, T0 - 10 * MIN)
        got = await asyncio.to_thread(s.get, JS, name, NS)
        hours, gpus = by_unit(await gangs.gang_costs(ctx, got, None), f"JobSet {NS}/{name}")
        # The restart resumed from the checkpoint: only the 10 min since are lost, not 40.
        assert gpus.value == 16 and hours.value == pytest.approx(16 * 10 / 60), hours
        assert hours.how == (
            "16 GPUs x 10 min since it restarted (its Jobs' status.startTime (restart 1, status.restarts)), "
            "after its last checkpoint (annotation training.corp/last-checkpoint)"
        )

        # A pod of the gang on a node: pod -> Job -> JobSet, found through the owner chain.
        await asyncio.to_thread(run_pod, s, NS, "restarts-w-0", new[0], "gpu-gang-0", T0 - 9 * MIN)
        costs, notes = await gangs.pods_costs(ctx, NS, await on_node(ctx, NS, "gpu-gang-0"), "(pods on gpu-gang-0)")
        hours, gpus = by_unit(costs, f"JobSet {NS}/{name} (pods on gpu-gang-0)")
        assert (hours.value, gpus.value, notes) == (pytest.approx(16 * 10 / 60), 16, []), costs
    finally:
        await asyncio.to_thread(s.delete, JS, name, namespace=NS)
        await asyncio.to_thread(delete_pods, s, NS, "restarts-w-0")
        await asyncio.to_thread(
            s.kubectl, "delete", "jobs.batch", "-n", NS, "-l", f"{NAME_LABEL}={name}", "--wait=false"
        )


async def test_a_plain_job_kueue_admits_is_found_from_its_pods_and_priced_from_its_workload(
    app,
    admin: Kube,
    queues: Queues,  # noqa: F811 (the fixture imported above)
    kueue_controller: KueueController,  # the real Kueue admits the Job (queues runs on it too)
):
    q, s, name = queues, queues.k.s, "plain-job"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": q.ns,
            "labels": {"kueue.x-k8s.io/queue-name": q.lq},
            "annotations": {CHECKPOINT: iso(T0 - 40 * MIN)},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "trainer", "image": "registry.invalid/t:1", "resources": {"limits": {GPU: 8}}}
                    ],
                }
            },
        },
    }
    await asyncio.to_thread(s.apply, job)
    uid = ""
    try:
        stored = await asyncio.to_thread(s.get, "job", name, q.ns)
        uid = stored["metadata"]["uid"]
        wl = await until(
            lambda: (q.k.workloads(q.ns, uid) or [{}])[0], lambda w: bool(w) and is_true(w, "Admitted"), "admitted"
        )
        stored = await until(lambda: s.get("job", name, q.ns), lambda j: j["spec"].get("suspend") is False)
        await asyncio.to_thread(start_job, s, q.ns, stored, T0 - 15 * MIN)
        for i in range(2):
            await asyncio.to_thread(run_pod, s, q.ns, f"{name}-{i}", stored, "gpu-gang-1", T0 - 14 * MIN)
        ctx = await ctx_of(app, admin, q.ns)
        costs, notes = await gangs.pods_costs(ctx, q.ns, await on_node(ctx, q.ns, "gpu-gang-1"), "(pods on gpu-gang-1)")
        hours, gpus = by_unit(costs, f"Job {q.ns}/{name} (pods on gpu-gang-1)")
        assert (gpus.value, gpus.how) == (16, f"Workload {wl['metadata']['name']} podSets"), gpus
        assert hours.value == pytest.approx(16 * 15 / 60), hours
        assert hours.how == (
            "16 GPUs x 15 min since it started (the Job's status.startTime), "
            "after its last checkpoint (annotation training.corp/last-checkpoint)"
        )
        assert notes == []
    finally:
        await asyncio.to_thread(s.delete, "job", name, namespace=q.ns)
        await asyncio.to_thread(delete_pods, s, q.ns, f"{name}-0", f"{name}-1")
        if uid:
            await asyncio.to_thread(
                s.kubectl, "delete", WL, "-n", q.ns, "-l", f"{JOB_UID}={uid}", "--ignore-not-found", "--timeout=60s"
            )


def pytorchjob_crd() -> dict:
    """A stand-in for Kubeflow's PyTorchJob CRD (kubeflow.org/v1): only that the kind is served matters
    here, so its schema keeps whatever it is given."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {
            "group": "kubeflow.org",
            "scope": "Namespaced",
            "names": {
                "plural": "pytorchjobs",
                "singular": "pytorchjob",
                "kind": "PyTorchJob",
                "listKind": "PyTorchJobList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


async def test_a_pytorchjob_is_found_through_its_pods_and_unknown_while_its_crd_is_not_served(
    app, admin: Kube, kube_apiserver: KubeAPIServer
):
    s, name = kube_apiserver, "llm"
    await asyncio.to_thread(s.namespace, NS)
    unserved = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "uid": str(uuid.uuid4())},
    }
    pods = ["llm-master-0", "llm-worker-0", "llm-master-0-b"]
    try:
        await asyncio.to_thread(run_pod, s, NS, pods[0], unserved, "gpu-gang-2", T0 - 20 * MIN)
        ctx = await ctx_of(app, admin, NS)
        costs, _ = await gangs.pods_costs(ctx, NS, await on_node(ctx, NS, "gpu-gang-2"), "(pods on gpu-gang-2)")
        hours, gpus = by_unit(costs, f"PyTorchJob {NS}/{name} (pods on gpu-gang-2)")
        why = f"its owner PyTorchJob {NS}/{name} is kubeflow.org/v1, which this cluster does not serve"
        assert (hours.value, hours.how, gpus.value) == (None, why, None), costs
        await asyncio.to_thread(delete_pods, s, NS, pods[0])

        await asyncio.to_thread(s.apply, pytorchjob_crd())
        await until(
            lambda: s.kubectl_result("get", "pytorchjobs.kubeflow.org", "-n", NS).returncode,
            lambda rc: rc == 0,
            "PyTorchJob served",
        )
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": NS, "annotations": {CHECKPOINT: iso(T0 - 40 * MIN)}},
            "spec": {"pytorchReplicaSpecs": {}},
        }
        await asyncio.to_thread(s.apply, job)
        job = await asyncio.to_thread(s.get, "pytorchjobs.kubeflow.org", name, NS)
        # The training operator's pods: one on the node, one elsewhere; the later started 20 min ago.
        await asyncio.to_thread(run_pod, s, NS, pods[2], job, "gpu-gang-2", T0 - 25 * MIN)
        await asyncio.to_thread(run_pod, s, NS, pods[1], job, "gpu-gang-3", T0 - 20 * MIN)
        ctx = await ctx_of(app, Kube(s.admin_kubeconfig, 10), NS)  # a new client: discovery is cached
        try:
            costs, notes = await gangs.pods_costs(ctx, NS, await on_node(ctx, NS, "gpu-gang-2"), "(pods on gpu-gang-2)")
        finally:
            await ctx.kube.close()
        hours, gpus = by_unit(costs, f"PyTorchJob {NS}/{name} (pods on gpu-gang-2)")
        assert (gpus.value, gpus.how) == (16, f"its 2 running pods' {GPU}"), gpus
        assert hours.value == pytest.approx(16 * 20 / 60), hours
        assert hours.how == (
            "16 GPUs x 20 min since it started (its 2 pods' status.startTime), "
            "after its last checkpoint (annotation training.corp/last-checkpoint)"
        )
        assert notes == []
    finally:
        await asyncio.to_thread(delete_pods, s, NS, *pods)
        await asyncio.to_thread(s.kubectl_result, "delete", "pytorchjobs.kubeflow.org", name, "-n", NS)
        await asyncio.to_thread(s.delete, "customresourcedefinition", "pytorchjobs.kubeflow.org")
