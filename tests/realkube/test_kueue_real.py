"""The real Kueue (tests/support/kueue_controller.py: the controller-manager built from
sigs.k8s.io/kueue at the version .ci/controllers/kueue pins, its webhooks on loopback) on the real
kube-apiserver: what Kueue itself does with a queued JobSet, a stopped ClusterQueue, a deactivated
Workload and a finished one, and then kueue-hold, kueue-hold-drain and jobset-suspend pulled, verified
and undone through the real app against it.

The real JobSet controller runs beside it (Kueue's JobSet integration works with it in a cluster):
an admitted JobSet gets its Jobs, a suspended one has them suspended. No kube-controller-manager runs,
so no Pod, Job controller or garbage collection: where a JobSet must finish, the test writes its Jobs'
status as the Job controller would, and the JobSet controller and Kueue take it from there. The
assertions are on what Kueue writes (Workloads, their conditions and admission, the JobSet's
spec.suspend, the ClusterQueue's status). Each test cleans up after itself: without a garbage
collector a Workload outlives its JobSet, and the lever namespace (train-llm) is shared with
tests/realkube/test_levers_live.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fbworld.kube import samples
from levers import hooks
from levers.executor import execute_approved
from levers.kube import FIELD_MANAGER
from levers.price import Price
from levers.requests import LeverState
from levers.store import lever_store
from tests.support.jobset_controller import JobSetController, complete_job, delete_children, jobs_of
from tests.support.kube_apiserver import KubeAPIServer, cond, until_read
from tests.support.kueue_controller import KueueController
from tests.support.levers import OPS, PROVENANCE, replace_hook, say

NS = "realkube-kueue"  # Kueue's own behaviour
LEVER_NS = "train-llm"  # where policies/levers.yaml lets jobset-suspend act and kueue-hold* read Workloads
FLAVOR = "h100-80gb"  # the flavor samples.cluster_queue names
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID = "kueue.x-k8s.io/job-uid"  # the label Kueue puts on a job's Workload
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
GPUS_PER_POD = 8  # samples.jobset's trainer
PATIENCE = 60.0  # Kueue's reaction on a loaded 2-core machine: seconds, not minutes


# ---------------------------------------------------------------------------------------------- objects


def flavor() -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}


def cluster_queue(name: str, gpus: int = 32) -> dict:
    """samples.cluster_queue with `gpus` of quota in its own cohort (a shared one would lend quota)."""
    cq = samples.cluster_queue(name=name, gpus=gpus)
    cq.pop("status")
    cq["spec"]["cohortName"] = f"{name}-cohort"
    return cq


def local_queue(ns: str, name: str, cq: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def jobset(ns: str, name: str, queue: str, pods: int = 2) -> dict:
    """samples.kueue_jobset at `pods` pods of 8 GPUs, created unsuspended as a user would write it."""
    js = samples.kueue_jobset(ns=ns, name=name, queue=queue)
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["parallelism"] = job["completions"] = pods
    return js


def is_true(obj: dict, ctype: str) -> bool:
    return cond(obj, ctype).get("status") == "True"


def managers(obj: dict) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or []}


@dataclass
class Kueued:
    """Reads of one server as admin; Workloads found as Kueue links them, by the job-uid label."""

    s: KubeAPIServer

    def jobset(self, ns: str, name: str) -> dict:
        return self.s.get("jobset.jobset.x-k8s.io", name, ns)

    def workloads(self, ns: str, uid: str) -> list[dict]:
        out = self.s.kubectl("get", WL, "-n", ns, "-l", f"{JOB_UID}={uid}", "-o", "json", "--show-managed-fields")
        return list(json.loads(out)["items"])

    def workload_of(self, ns: str, name: str) -> dict:
        """The JobSet's one Workload ({} while Kueue has made none)."""
        found = self.workloads(ns, self.jobset(ns, name)["metadata"]["uid"])
        assert len(found) <= 1, [w["metadata"]["name"] for w in found]
        return found[0] if found else {}

    def cluster_queue(self, name: str) -> dict:
        return self.s.get(CQ, name)

    def patch(self, resource: str, name: str, ns: str | None, body: dict, status: bool = False) -> None:
        where = ["-n", ns] if ns else []
        sub = ["--subresource", "status"] if status else []
        self.s.kubectl("patch", resource, name, *where, *sub, "--type", "merge", "-p", json.dumps(body))

    def stop_policy(self, cq: str, policy: str) -> None:
        self.patch(CQ, cq, None, {"spec": {"stopPolicy": policy}})

    def finish(self, ns: str, name: str) -> None:
        """The JobSet's Jobs all succeed, as the Job controller records it (their pods are not run): the
        JobSet controller then marks the JobSet Completed, which Kueue's jobset integration reads as
        finished. Blocking: waits for the JobSet controller to have made its Jobs first."""
        deadline = time.monotonic() + PATIENCE
        want = sum(r.get("replicas", 1) for r in self.jobset(ns, name)["spec"]["replicatedJobs"])
        while len(jobs := jobs_of(self.s, ns, name)) < want:
            assert time.monotonic() < deadline, f"the JobSet controller made {len(jobs)} of {want} Jobs for {name}"
            time.sleep(0.2)
        for job in jobs:
            complete_job(self.s, ns, job)


async def until(read: Callable[[], dict], ok: Callable[[dict], Any], what: str, seconds: float = PATIENCE) -> dict:
    """until_read, with an empty read (no such object yet) never taken for the awaited state."""
    return await until_read(read, lambda got: bool(got) and ok(got), what, seconds, every=0.2)


@dataclass
class Queues:
    k: Kueued
    ns: str
    cq: str
    lq: str
    jobsets: list[str]

    def put_jobset(self, name: str, pods: int = 2) -> None:
        self.k.s.apply(jobset(self.ns, name, self.lq, pods))
        self.jobsets.append(name)

    async def admitted(self, name: str) -> dict:
        """The JobSet's Workload once Kueue admitted it and unsuspended the JobSet."""
        wl = await until(
            lambda: self.k.workload_of(self.ns, name), lambda w: is_true(w, "Admitted"), f"{name}'s Workload admitted"
        )
        await until(
            lambda: self.k.jobset(self.ns, name),
            lambda j: j["spec"].get("suspend") is False,
            f"JobSet {name} unsuspended by Kueue",
        )
        return wl

    async def suspended(self, name: str) -> dict:
        return await until(
            lambda: self.k.jobset(self.ns, name), lambda j: j["spec"].get("suspend") is True, f"JobSet {name} suspended"
        )

    def cleanup(self) -> None:
        """JobSets first (Kueue then drops its finalizer from their Workloads: the job is gone), then the
        Workloads (no garbage collector here), the queues; waits until no Workload of ours is left."""
        s = self.k.s
        uids = []
        for name in self.jobsets:
            got = s.kubectl_result("get", "jobset.jobset.x-k8s.io", name, "-n", self.ns, "-o", "json")
            if got.returncode == 0:
                uids.append(json.loads(got.stdout)["metadata"]["uid"])
        if self.jobsets:
            s.delete("jobset.jobset.x-k8s.io", *self.jobsets, namespace=self.ns)
            delete_children(s, self.ns, *self.jobsets)
        for uid in uids:
            s.kubectl("delete", WL, "-n", self.ns, "-l", f"{JOB_UID}={uid}", "--ignore-not-found", "--timeout=60s")
        s.delete("localqueue.kueue.x-k8s.io", self.lq, namespace=self.ns)
        s.delete(CQ, self.cq)


@pytest.fixture
async def queues(
    request: pytest.FixtureRequest,
    kueue_controller: KueueController,
    jobset_controller: JobSetController,
    kube_apiserver: KubeAPIServer,
) -> AsyncIterator[Queues]:
    """A ClusterQueue (32 GPUs) and a LocalQueue in NS named after the test; Kueue must still be running
    at the end (a crash fails the test with its log)."""
    s = kube_apiserver
    name = "rk-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())[:40].strip("-")
    await asyncio.to_thread(s.namespace, NS)
    await asyncio.to_thread(s.apply, flavor(), cluster_queue(name), local_queue(NS, name, name))
    q = Queues(Kueued(s), NS, name, name, [])
    yield q
    await asyncio.to_thread(q.cleanup)
    assert kueue_controller.alive(), f"Kueue exited:\n{kueue_controller.log_tail()}"


# ---------------------------------------------------------------------------------------------- Kueue itself


async def test_kueue_admits_a_queued_jobset_and_unsuspends_it(queues: Queues):
    q, k = queues, queues.k
    # Kueue's JobSet webhook suspends a queued JobSet at creation (a server-side dry run shows it).
    dry = await asyncio.to_thread(
        k.s.kubectl, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(jobset(q.ns, "adm", q.lq))
    )
    assert json.loads(dry)["spec"]["suspend"] is True

    await asyncio.to_thread(q.put_jobset, "adm")
    wl = await q.admitted("adm")
    js = await asyncio.to_thread(k.jobset, q.ns, "adm")
    uid = js["metadata"]["uid"]
    assert wl["metadata"]["name"].startswith("jobset-adm-") and wl["metadata"]["labels"][JOB_UID] == uid
    [owner] = [r for r in wl["metadata"]["ownerReferences"] if r.get("controller")]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("JobSet", "adm", uid)
    assert wl["spec"]["queueName"] == q.lq and wl["spec"].get("active", True) is True
    adm = wl["status"]["admission"]
    assert adm["clusterQueue"] == q.cq
    [ps] = adm["podSetAssignments"]
    assert ps["flavors"] == {"nvidia.com/gpu": FLAVOR} and ps["count"] == 2, ps
    assert is_true(wl, "QuotaReserved") and "kueue.x-k8s.io/resource-in-use" in wl["metadata"]["finalizers"]
    # Who wrote what, as managedFields record it: Kueue's client (User-Agent "kueue/<version>") created the
    # Workload and unsuspended the JobSet; the scheduler's admission is its own server-side apply.
    assert {"kueue", "kueue-admission"} <= managers(wl) and "kueue" in managers(js), (managers(wl), managers(js))
    # The queue's books: one admitted Workload, its 16 GPUs in use.
    cq = await until(
        lambda: k.cluster_queue(q.cq), lambda c: c.get("status", {}).get("admittedWorkloads") == 1, "CQ counts it"
    )
    [usage] = cq["status"]["flavorsUsage"]
    assert {r["name"]: r["total"] for r in usage["resources"]}["nvidia.com/gpu"] == "16", usage
    assert is_true(cq, "Active")

    # The same objects through the v1beta1 API this version still serves: converted by Kueue's webhook
    # (v1beta2 spec.cohortName is v1beta1 spec.cohort), not just relabelled.
    old = json.loads(
        await asyncio.to_thread(k.s.kubectl, "get", "clusterqueues.v1beta1.kueue.x-k8s.io", q.cq, "-o", "json")
    )
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1" and old["spec"]["cohort"] == f"{q.cq}-cohort", old["spec"]
    assert "cohortName" not in old["spec"]
    old_wl = json.loads(
        await asyncio.to_thread(
            k.s.kubectl, "get", "workloads.v1beta1.kueue.x-k8s.io", wl["metadata"]["name"], "-n", q.ns, "-o", "json"
        )
    )
    assert old_wl["status"]["admission"]["clusterQueue"] == q.cq


async def test_stop_policy_hold_then_hold_and_drain_then_none(queues: Queues):
    q, k = queues, queues.k
    await asyncio.to_thread(q.put_jobset, "run-a")
    await q.admitted("run-a")

    # Hold: the queue goes inactive; a new Workload is not admitted; the admitted one keeps running.
    await asyncio.to_thread(k.stop_policy, q.cq, "Hold")
    cq = await until(lambda: k.cluster_queue(q.cq), lambda c: cond(c, "Active").get("status") == "False", "inactive")
    assert cond(cq, "Active")["reason"] == "Stopped", cond(cq, "Active")
    await asyncio.to_thread(q.put_jobset, "run-b")
    b = await until(
        lambda: k.workload_of(q.ns, "run-b"),
        lambda w: cond(w, "QuotaReserved").get("status") == "False",
        "run-b's Workload pending",
    )
    assert f"ClusterQueue {q.cq} is inactive" in cond(b, "QuotaReserved")["message"], cond(b, "QuotaReserved")
    assert "admission" not in b["status"] and (await asyncio.to_thread(k.jobset, q.ns, "run-b"))["spec"]["suspend"]
    a = await asyncio.to_thread(k.workload_of, q.ns, "run-a")
    assert is_true(a, "Admitted") and not is_true(a, "Evicted")
    assert (await asyncio.to_thread(k.jobset, q.ns, "run-a"))["spec"]["suspend"] is False

    # HoldAndDrain: the admitted Workload is evicted (ClusterQueueStopped), its JobSet suspended again,
    # its quota released.
    await asyncio.to_thread(k.stop_policy, q.cq, "HoldAndDrain")
    a = await until(lambda: k.workload_of(q.ns, "run-a"), lambda w: is_true(w, "Evicted"), "run-a evicted")
    assert cond(a, "Evicted")["reason"] == "ClusterQueueStopped", cond(a, "Evicted")
    await q.suspended("run-a")
    a = await until(
        lambda: k.workload_of(q.ns, "run-a"),
        lambda w: not is_true(w, "QuotaReserved") and "admission" not in w["status"],
        "run-a's quota released",
    )
    assert not is_true(a, "Admitted")
    assert (cond(a, "Requeued")["status"], cond(a, "Requeued")["reason"]) == ("False", "ClusterQueueStopped")

    # stopPolicy back to None: both admitted (16 + 16 of 32 GPUs), both JobSets running.
    await asyncio.to_thread(k.stop_policy, q.cq, "None")
    a = await q.admitted("run-a")
    await q.admitted("run-b")
    assert (cond(a, "Requeued")["status"], cond(a, "Requeued")["reason"]) == ("True", "ClusterQueueRestarted")
    await until(lambda: k.cluster_queue(q.cq), lambda c: is_true(c, "Active"), "active again")


async def test_deactivated_workload_is_evicted_and_its_jobset_suspended(queues: Queues):
    q, k = queues, queues.k
    await asyncio.to_thread(q.put_jobset, "deact")
    name = (await q.admitted("deact"))["metadata"]["name"]

    await asyncio.to_thread(k.patch, WL, name, q.ns, {"spec": {"active": False}})
    wl = await until(lambda: k.workload_of(q.ns, "deact"), lambda w: is_true(w, "Evicted"), "evicted")
    assert cond(wl, "Evicted")["reason"] == "Deactivated", cond(wl, "Evicted")
    assert cond(wl, "Evicted")["message"] == "The workload is deactivated", cond(wl, "Evicted")
    await q.suspended("deact")
    wl = await until(
        lambda: k.workload_of(q.ns, "deact"),
        lambda w: not is_true(w, "QuotaReserved") and "admission" not in w["status"],
        "quota released",
    )
    assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("False", "Deactivated")

    await asyncio.to_thread(k.patch, WL, name, q.ns, {"spec": {"active": True}})
    wl = await q.admitted("deact")
    assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("True", "Reactivated")


async def test_a_finished_workload_keeps_its_admission(queues: Queues):
    """Kueue marks the Workload of a finished JobSet Finished and releases its quota, but never clears
    status.admission: a count of 'admitted' Workloads by status.admission counts finished ones."""
    q, k = queues, queues.k
    await asyncio.to_thread(q.put_jobset, "done")
    await q.admitted("done")
    await asyncio.to_thread(k.finish, q.ns, "done")
    wl = await until(lambda: k.workload_of(q.ns, "done"), lambda w: is_true(w, "Finished"), "finished")
    assert cond(wl, "Finished")["reason"] == "Succeeded", cond(wl, "Finished")
    assert wl["status"]["admission"]["clusterQueue"] == q.cq
    cq = await until(
        lambda: k.cluster_queue(q.cq), lambda c: c.get("status", {}).get("admittedWorkloads") == 0, "CQ uncounts it"
    )
    [usage] = cq["status"]["flavorsUsage"]
    assert {r["name"]: r["total"] for r in usage["resources"]}["nvidia.com/gpu"] == "0", usage
    # Still listed with its admission (the finalizer gone: nothing holds it any more).
    wl = await asyncio.to_thread(k.workload_of, q.ns, "done")
    assert wl["status"]["admission"]["clusterQueue"] == q.cq and is_true(wl, "Finished")
    assert "kueue.x-k8s.io/resource-in-use" not in (wl["metadata"].get("finalizers") or [])


# ---------------------------------------------------------------------------------------------- the levers


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


def desired(obj: dict) -> dict:
    """What a lever changes and its undo restores (tests/realkube/test_levers_live.py's view)."""
    meta = obj["metadata"]
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in PROVENANCE}
    return {"spec": obj.get("spec"), "labels": meta.get("labels") or {}, "annotations": ann}


@pytest.fixture
async def lever_queues(
    kueue_controller: KueueController, jobset_controller: JobSetController, deployed: KubeAPIServer
) -> AsyncIterator[Queues]:
    """In train-llm (the levers' namespace): a ClusterQueue of 32 GPUs, a LocalQueue, a running JobSet
    (16 GPUs, admitted) and a finished one (its Workload Finished, its admission kept)."""
    s = deployed
    name = "rk-lever"
    await asyncio.to_thread(s.namespace, LEVER_NS)
    await asyncio.to_thread(s.apply, flavor(), cluster_queue(name), local_queue(LEVER_NS, name, name))
    q = Queues(Kueued(s), LEVER_NS, name, name, [])
    try:
        await asyncio.to_thread(q.put_jobset, "rk-run")
        await asyncio.to_thread(q.put_jobset, "rk-done")
        await q.admitted("rk-run")
        await q.admitted("rk-done")
        await asyncio.to_thread(q.k.finish, LEVER_NS, "rk-done")
        await until(lambda: q.k.workload_of(LEVER_NS, "rk-done"), lambda w: is_true(w, "Finished"), "finished")
        await until(
            lambda: q.k.cluster_queue(name), lambda c: c.get("status", {}).get("admittedWorkloads") == 1, "one admitted"
        )
        yield q
    finally:
        await asyncio.to_thread(q.cleanup)
    assert kueue_controller.alive(), f"Kueue exited:\n{kueue_controller.log_tail()}"


async def test_kueue_levers_pull_verify_and_undo_against_real_kueue(app, lever_queues: Queues):
    q, k = lever_queues, lever_queues.k
    store = lever_store(app.services)
    asked: list = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3", "us-east-1"), roles={"ops": OPS})

    async def pull(command: str) -> tuple[str, Any]:
        asked.clear()
        out = await say(app, command, OPS, inc.channel_id, timeout=60)
        req = req_of(out)
        if asked:  # kueue-hold-drain, and any lever on us-east-1 (the fleet context): the IC approves
            assert "needs approval" in out, out
            pending, approved = {LeverState.pending_approval}, LeverState.approved
            assert await store.transition(asked[-1].id, pending, approved, approved_by="U_IC")
            out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
        rec = await store.get(req)
        assert rec is not None and rec.state == "done", (command, out)
        assert rec.result.get("verified") is True, (command, out, rec.result)
        return req, rec

    async def undo(req: str) -> None:
        out = await app.run(f"undo {req}", user=OPS, channel=inc.channel_id)
        rec = await store.get(req)
        assert "undone" in out and rec is not None and rec.state == "undone", out

    async def price(command: str) -> Price:
        dry = await say(app, f"{command} --dry-run", OPS, inc.channel_id, timeout=60)
        assert "(dry run)" in dry and "Nothing was changed" in dry, dry
        rec = await store.get(req_of(dry))
        priced = Price.from_record(rec.plan["price"]) if rec is not None else None
        assert priced is not None, dry
        return priced

    before_cq = await asyncio.to_thread(k.cluster_queue, q.cq)

    # kueue-hold: priced with the one running Workload (the finished one keeps its admission but runs
    # nothing), pulled, Kueue stops admitting; the admitted one runs on. Undo: active again.
    hold = f"lever kueue-hold {q.cq} --cell us-east-3"
    p = await price(hold)
    assert "1 admitted workload keeps running (16 GPUs)" in p.notes, p.notes
    req, _ = await pull(hold)
    cq = await until(lambda: k.cluster_queue(q.cq), lambda c: cond(c, "Active").get("status") == "False", "held")
    assert cq["spec"]["stopPolicy"] == "Hold" and cond(cq, "Active")["reason"] == "Stopped"
    assert FIELD_MANAGER in managers(cq) and cq["metadata"]["annotations"]["firebreak.io/request"] == req
    run = await asyncio.to_thread(k.workload_of, q.ns, "rk-run")
    assert is_true(run, "Admitted") and (await asyncio.to_thread(k.jobset, q.ns, "rk-run"))["spec"]["suspend"] is False
    await undo(req)
    cq = await until(lambda: k.cluster_queue(q.cq), lambda c: is_true(c, "Active"), "active again")
    assert desired(cq) == desired(before_cq)

    # kueue-hold-drain: priced at the running Workload and its GPUs, approved, pulled; Kueue evicts it
    # (ClusterQueueStopped) and suspends its JobSet. Undo: Kueue admits it again and the JobSet runs.
    drain = f"lever kueue-hold-drain {q.cq} --cell us-east-3"
    p = await price(drain)
    evicted = {c.unit: c.value for c in p.costs if "evicted" in c.what}
    assert evicted == {"workloads": 1, "GPUs": 16}, p.costs
    req, _ = await pull(drain)
    run = await until(lambda: k.workload_of(q.ns, "rk-run"), lambda w: is_true(w, "Evicted"), "rk-run evicted")
    assert cond(run, "Evicted")["reason"] == "ClusterQueueStopped", cond(run, "Evicted")
    await q.suspended("rk-run")
    await undo(req)
    await q.admitted("rk-run")
    cq = await asyncio.to_thread(k.cluster_queue, q.cq)
    assert desired(cq) == desired(before_cq)

    # jobset-suspend of the Kueue-queued JobSet: through its Workload (spec.active=false); verified
    # once real Kueue has suspended the JobSet. Undo: active again, Kueue re-admits and unsuspends.
    wl_before = await asyncio.to_thread(k.workload_of, q.ns, "rk-run")
    req, rec = await pull(f"lever jobset-suspend {q.ns}/rk-run --cell us-east-1")
    assert "Kueue suspended the JobSet" in rec.result.get("verify", ""), rec.result
    wl = await asyncio.to_thread(k.workload_of, q.ns, "rk-run")
    assert wl["metadata"]["name"] == wl_before["metadata"]["name"] and wl["spec"]["active"] is False
    assert FIELD_MANAGER in managers(wl) and wl["metadata"]["annotations"]["firebreak.io/request"] == req
    wl = await until(lambda: k.workload_of(q.ns, "rk-run"), lambda w: is_true(w, "Evicted"), "deactivated")
    assert cond(wl, "Evicted")["reason"] == "Deactivated"
    assert (await asyncio.to_thread(k.jobset, q.ns, "rk-run"))["spec"]["suspend"] is True
    await undo(req)
    wl = await q.admitted("rk-run")
    assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("True", "Reactivated")
    assert desired(wl) == desired(wl_before)

    # The finished JobSet: its Workload is Finished, which Kueue no longer reconciles (a deactivation
    # would never suspend anything); the lever says so instead of writing.
    out = await say(app, f"lever jobset-suspend {q.ns}/rk-done --cell us-east-1", OPS, inc.channel_id, timeout=60)
    assert "finished" in out and "nothing to stop" in out, out
    done = await asyncio.to_thread(k.workload_of, q.ns, "rk-done")
    assert done["spec"].get("active", True) is True and FIELD_MANAGER not in managers(done)
