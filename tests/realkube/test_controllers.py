"""The stand-ins for Kueue, Argo Rollouts and KEDA (fbworld.realkube) on the real server do what the
upstream controllers do for the fields the levers read: driven here as admin, read back as admin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from fbworld.kube import samples
from tests.support.kube_apiserver import KubeAPIServer

NS = "realkube-ctl"


async def until(s: KubeAPIServer, read: Callable[[], dict], ok: Callable[[dict], Any], seconds: float = 10.0) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        got = await asyncio.to_thread(read)
        if ok(got):
            return got
        if loop.time() > deadline:
            raise AssertionError(json.dumps(got, indent=1)[-3000:])
        await asyncio.sleep(0.1)


def cond(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


async def test_keda_pause_annotations(deployed: KubeAPIServer, controllers):
    s = deployed
    await asyncio.to_thread(s.namespace, NS)
    so = samples.scaled_object(ns=NS, name="web", target="web")
    so["spec"]["scaleTargetRef"] = {"name": "web"}  # KEDA's default kind: an apps/v1 Deployment
    await asyncio.to_thread(s.put, samples.deployment(ns=NS, name="web", replicas=6), so)
    try:

        def read_so() -> dict:
            return s.get("scaledobject.keda.sh", "web", NS)

        def replicas() -> int:
            return int(s.get("deployment.apps", "web", NS)["spec"]["replicas"])

        # paused-replicas: the target is scaled to the count through /scale, and the status says so.
        await asyncio.to_thread(
            s.kubectl, "annotate", "scaledobject.keda.sh", "web", "-n", NS, "autoscaling.keda.sh/paused-replicas=2"
        )
        got = await until(s, read_so, lambda o: cond(o, "Paused").get("status") == "True")
        assert cond(got, "Paused")["reason"] == "ScaledObjectPaused" and got["status"]["pausedReplicaCount"] == 2
        assert await asyncio.to_thread(replicas) == 2
        # Removed: unpaused, pausedReplicaCount dropped; the count stays where the pause left it.
        await asyncio.to_thread(
            s.kubectl, "annotate", "scaledobject.keda.sh", "web", "-n", NS, "autoscaling.keda.sh/paused-replicas-"
        )
        got = await until(s, read_so, lambda o: cond(o, "Paused").get("status") == "False")
        assert cond(got, "Paused")["reason"] == "ScaledObjectUnpaused" and "pausedReplicaCount" not in got["status"]
        # paused: "true" freezes at the current count.
        await asyncio.to_thread(s.kubectl, "scale", "deployment", "web", "-n", NS, "--replicas", "5")
        await asyncio.to_thread(
            s.kubectl, "annotate", "scaledobject.keda.sh", "web", "-n", NS, "autoscaling.keda.sh/paused=true"
        )
        got = await until(s, read_so, lambda o: cond(o, "Paused").get("status") == "True")
        assert "pausedReplicaCount" not in got["status"] and await asyncio.to_thread(replicas) == 5
    finally:
        await asyncio.to_thread(s.delete, "scaledobject.keda.sh", "web", namespace=NS)
        await asyncio.to_thread(s.delete, "deployment.apps", "web", namespace=NS)


async def test_kueue_admits_deactivates_and_reactivates_a_jobset(deployed: KubeAPIServer, controllers):
    s = deployed
    await asyncio.to_thread(s.namespace, NS)
    await asyncio.to_thread(s.put, samples.cluster_queue(name="ctl-cq"), samples.kueue_jobset(ns=NS, name="train"))
    try:

        def workload() -> dict:
            items = json.loads(s.kubectl("get", "workloads.kueue.x-k8s.io", "-n", NS, "-o", "json"))["items"]
            return items[0] if items else {}

        def jobset() -> dict:
            return s.get("jobset.jobset.x-k8s.io", "train", NS)

        wl = await until(s, workload, lambda w: cond(w, "Admitted").get("status") == "True")
        uid = (await asyncio.to_thread(jobset))["metadata"]["uid"]
        assert (
            wl["metadata"]["name"].startswith("jobset-train-")
            and wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
        )
        assert wl["status"]["admission"]["clusterQueue"] == "ctl-cq"
        name = wl["metadata"]["name"]

        await asyncio.to_thread(
            s.kubectl,
            "patch",
            "workloads.kueue.x-k8s.io",
            name,
            "-n",
            NS,
            "--type",
            "merge",
            "-p",
            '{"spec":{"active":false}}',
        )
        wl = await until(s, workload, lambda w: cond(w, "QuotaReserved").get("status") == "False")
        assert (cond(wl, "Evicted")["status"], cond(wl, "Evicted")["reason"]) == ("True", "Deactivated")
        assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("False", "Deactivated")
        assert "admission" not in wl["status"] and (await asyncio.to_thread(jobset))["spec"]["suspend"] is True

        await asyncio.to_thread(
            s.kubectl,
            "patch",
            "workloads.kueue.x-k8s.io",
            name,
            "-n",
            NS,
            "--type",
            "merge",
            "-p",
            '{"spec":{"active":true}}',
        )
        wl = await until(s, workload, lambda w: cond(w, "Admitted").get("status") == "True")
        assert cond(wl, "Requeued")["reason"] == "Reactivated"
        await until(s, jobset, lambda j: j["spec"]["suspend"] is False)
        managers = {
            m["manager"]
            for m in json.loads(
                s.kubectl("get", "workloads.kueue.x-k8s.io", name, "-n", NS, "-o", "json", "--show-managed-fields")
            )["metadata"]["managedFields"]
        }
        assert {"manager", "kueue-admission"} <= managers, managers
    finally:
        await asyncio.to_thread(s.delete, "jobset.jobset.x-k8s.io", "train", namespace=NS)
        await asyncio.to_thread(s.delete, "clusterqueue.kueue.x-k8s.io", "ctl-cq")
        await asyncio.to_thread(
            s.kubectl, "delete", "workloads.kueue.x-k8s.io", "--all", "-n", NS, "--ignore-not-found"
        )


async def test_argo_abort_scales_back_to_stable(deployed: KubeAPIServer, controllers):
    s = deployed
    await asyncio.to_thread(s.namespace, NS)
    ro = samples.rollout(ns=NS, name="model")
    sets = samples.rollout_replica_sets(ro)
    await asyncio.to_thread(s.put, ro, *sets)
    stable, canary = (rs["metadata"]["name"] for rs in sets)
    try:
        await asyncio.to_thread(
            s.kubectl,
            "patch",
            "rollout.argoproj.io",
            "model",
            "-n",
            NS,
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            '{"status":{"abort":true}}',
        )

        def read() -> dict:
            return s.get("rollout.argoproj.io", "model", NS)

        got = await until(s, read, lambda o: o["status"].get("phase") == "Degraded")
        prog = cond(got, "Progressing")
        assert (prog["status"], prog["reason"]) == ("False", "RolloutAborted") and got["status"]["message"].startswith(
            "RolloutAborted: "
        )
        assert got["status"]["currentStepIndex"] == 0 and "pauseConditions" not in got["status"]
        assert (await asyncio.to_thread(s.get, "replicaset.apps", stable, NS))["spec"]["replicas"] == ro["spec"][
            "replicas"
        ]
        assert (await asyncio.to_thread(s.get, "replicaset.apps", canary, NS))["spec"]["replicas"] == 0
    finally:
        await asyncio.to_thread(s.delete, "rollout.argoproj.io", "model", namespace=NS)
        await asyncio.to_thread(s.delete, "replicaset.apps", stable, canary, namespace=NS)
