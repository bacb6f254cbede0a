"""Every lever on a real kube-apiserver, as the bot's own ServiceAccount (a TokenRequest token of
firebreak/firebreak) with deploy/overlays/example applied by `kubectl apply -k`: dry run (dryRun=All:
the server's RBAC, admission and schema answer, nothing stored), pull, verify and undo each. What
the levers wrote is read back as admin: changed as planned, `firebreak` in managedFields, restored
by undo. tests/deploy/test_rbac_live.py runs the same levers on the emulator with the ClusterRole's
rules; here the real RBAC authorizer and admission chain decide.

The controllers are the real ones (tests/realkube/conftest.py `controllers`): Argo Rollouts, KEDA,
Kueue and JobSet built from their upstream modules, and NodeHealthCheck's stand-in (upstream is not
served here). The seeded objects are what they need to run (a ResourceFlavor, a LocalQueue and the quota for
the queued JobSet, the Rollout's Services, the NodeHealthCheck's remediation template, triggers KEDA
can evaluate here), every status is theirs, and each pull and undo waits for the controller's own
reaction (`reaction` below). No ReplicaSet controller or kubelet runs: the Rollout's ReplicaSets are
reported available at whatever size Argo gives them (`follow_replica_sets`), for the whole test."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import yaml

from fbworld.kube import samples
from levers import hooks
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.kube import FIELD_MANAGER
from levers.store import lever_store
from tests.realkube.conftest import OVERLAY
from tests.support.argo_controller import HASH_LABEL, follow_replica_sets, replica_sets
from tests.support.catalogue import assert_every_lever, lever_of
from tests.support.deploy import DEPLOY
from tests.support.jobset_controller import delete_children, jobs_of
from tests.support.kube_apiserver import BOT_NS, BOT_SA, KubeAPIServer, cond, until_read
from tests.support.levers import MODEL, OPS, PROVENANCE, SEC, replace_hook, say
from tests.support.real_controllers import Controllers

NS = "serve-chat"
TRAIN = "train-llm"
NHC_NS = "medik8s"  # where samples.node_health_check's remediation template lives
NAMESPACES = ("serve-chat", "train-llm", "sbx-tenant-acme", "toolgw", "edge", NHC_NS)
QUARANTINE = "ir.corp/quarantine"
ROLLOUT = "llm-70b"
ARGO = "rollouts-controller"  # Argo's field manager
PATIENCE = 60.0  # a controller's reaction on a loaded 2-core machine: seconds, not minutes
WL = "workloads.kueue.x-k8s.io"
SO = "scaledobject.keda.sh"
JS = "jobset.jobset.x-k8s.io"
NHC = "nodehealthcheck.remediation.medik8s.io"
CQ_RES = "clusterqueue.kueue.x-k8s.io"
QUEUED = "finetune-8b"  # the Kueue-queued JobSet
PLAIN = "pretrain-405b"  # the JobSet nothing but the JobSet controller manages
OTHER_PAUSE = "maintenance-window-42"  # another party's NodeHealthCheck pause, which stays


# ---------------------------------------------------------------------------------------------- seeds


def cron_inactive() -> dict:
    """A trigger KEDA evaluates with nothing outside (the samples' Prometheus address resolves nowhere
    here): a cron window twelve hours away, so inactive; KEDA keeps the target at or above the minimum."""
    hour = (dt.datetime.now(dt.UTC).hour + 12) % 24
    return {
        "type": "cron",
        "metadata": {"timezone": "UTC", "start": f"0 {hour} * * *", "end": f"30 {hour} * * *", "desiredReplicas": "5"},
    }


def scaled(name: str, api_version: str, kind: str, target: str) -> dict:
    so = samples.scaled_object(name=name, target=target)
    so["spec"]["scaleTargetRef"] = {"apiVersion": api_version, "kind": kind, "name": target}
    so["spec"]["triggers"] = [cron_inactive()]
    return so


def quarantine_policy() -> dict:
    """The deny-all NetworkPolicy a platform team keeps beside agent sandboxes for the quarantine label."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "quarantine-deny-all", "namespace": "sbx-tenant-acme"},
        "spec": {"podSelector": {"matchLabels": {QUARANTINE: "true"}}, "policyTypes": ["Ingress", "Egress"]},
    }


def no_status(obj: dict) -> dict:
    """A sample as its owner creates it: the status is its controller's to write."""
    obj.pop("status", None)
    return obj


def kueue_objects() -> list[dict]:
    """research-h100 (128 GPUs) with its flavor, the LocalQueue the queued JobSet names, and that JobSet
    at 4 pods of 8 GPUs (samples.kueue_jobset's 64 would never fit the quota, so never be admitted)."""
    cq = no_status(samples.cluster_queue())
    flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    queue = samples.kueue_jobset()["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    js = samples.kueue_jobset(name=QUEUED)
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["parallelism"] = job["completions"] = 4
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        cq,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": TRAIN},
            "spec": {"clusterQueue": cq["metadata"]["name"]},
        },
        js,
    ]


def rollout_objects() -> list[dict]:
    """The Rollout and the canary and stable Services its strategy names (Argo refuses a canary whose
    Services are missing); Argo makes its ReplicaSets."""
    ro = no_status(samples.rollout(name=ROLLOUT))
    services = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ro["spec"]["strategy"]["canary"][key], "namespace": NS},
            "spec": {"selector": {"app": ROLLOUT}, "ports": [{"port": 80, "targetPort": 8000}]},
        }
        for key in ("canaryService", "stableService")
    ]
    return [*services, ro]


def remediation_template() -> dict:
    """The Self Node Remediation template the NodeHealthCheck sample names (SNR's NewRemediationTemplates
    default, with the annotation SNR's webhook adds; none runs here): without it NodeHealthCheck is
    Disabled (RemediationTemplateNotFound)."""
    ref = samples.node_health_check()["spec"]["remediationTemplate"]
    return {
        "apiVersion": ref["apiVersion"],
        "kind": ref["kind"],
        "metadata": {
            "name": ref["name"],
            "namespace": ref["namespace"],
            "labels": {"remediation.medik8s.io/default-template": "true"},
            "annotations": {"remediation.medik8s.io/multiple-templates-support": "true"},
        },
        "spec": {"template": {"spec": {"remediationStrategy": "Automatic"}}},
    }


def seeds() -> list[dict]:
    """One cell's objects (overlays/example: the home cluster is the cell and the fleet context)."""
    return [
        *kueue_objects(),
        samples.deployment(name=ROLLOUT, replicas=6),
        scaled(ROLLOUT, "apps/v1", "Deployment", ROLLOUT),
        samples.stateful_set(NS, "llm-sts", replicas=4),  # at the ScaledObject's minReplicaCount
        scaled("llm-sts", "apps/v1", "StatefulSet", "llm-sts"),
        scaled("llm-ro", "argoproj.io/v1alpha1", "Rollout", ROLLOUT),
        *rollout_objects(),
        samples.jobset(),
        samples.pod(),
        quarantine_policy(),
        samples.configmap_toolgw(),
        *(samples.gpu_node(f"gpu-a3-{i:04d}", "us-east-3") for i in range(10)),
        samples.http_route(backends={"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0}),
        remediation_template(),
        no_status(samples.node_health_check(pause_requests=[OTHER_PAUSE])),  # another party's entry stays
    ]


# ---------------------------------------------------------------------------------------------- reads


def is_true(obj: dict, ctype: str) -> bool:
    return cond(obj, ctype).get("status") == "True"


def workloads(s: KubeAPIServer) -> list[dict]:
    return list(json.loads(s.kubectl("get", WL, "-n", TRAIN, "-o", "json", "--show-managed-fields"))["items"])


def queued_workload(s: KubeAPIServer) -> dict:
    """The queued JobSet's Workload ({} while Kueue has made none), found by its owner's uid."""
    uid = s.get(JS, QUEUED, TRAIN)["metadata"]["uid"]
    found = [w for w in workloads(s) if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid]
    return found[0] if found else {}


def hpa(s: KubeAPIServer, so: str) -> dict | None:
    done = s.kubectl_result("get", "horizontalpodautoscaler.autoscaling", f"keda-hpa-{so}", "-n", NS, "-o", "json")
    return json.loads(done.stdout) if done.returncode == 0 else None


def by_hash(s: KubeAPIServer) -> dict[str, dict]:
    return {rs["metadata"]["labels"][HASH_LABEL]: rs for rs in replica_sets(s, NS, f"app={ROLLOUT}")}


async def until(read: Callable[[], Any], ok: Callable[[Any], Any], what: str, seconds: float = PATIENCE) -> Any:
    return await until_read(read, ok, what, seconds, every=0.2)


# ---------------------------------------------------------------------------------------------- the cell


async def mid_canary(s: KubeAPIServer) -> None:
    """The Rollout as a deploy leaves it mid-update: revision 1 made stable by Argo (Healthy), then a new
    image, which Argo takes to its first pause at 20%. Inside follow_replica_sets."""
    ro = await until(
        lambda: s.get("rollout.argoproj.io", ROLLOUT, NS),
        lambda r: (r.get("status") or {}).get("phase") == "Healthy",
        "revision 1 Healthy",
    )
    image = ro["spec"]["template"]["spec"]["containers"][0]["image"]
    ops = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image + "-rc2"}]
    await asyncio.to_thread(
        s.kubectl, "patch", "rollout.argoproj.io", ROLLOUT, "-n", NS, "--type", "json", "-p", json.dumps(ops)
    )
    await until(
        lambda: s.get("rollout.argoproj.io", ROLLOUT, NS),
        lambda r: r["status"].get("phase") == "Paused" and r["status"].get("currentStepIndex") == 1,
        "revision 2 paused at its first step",
    )


async def settled(s: KubeAPIServer) -> None:
    """Each controller has made the seeded objects its own: Kueue admitted the queued JobSet (and unsuspended it),
    KEDA reconciled each ScaledObject (Ready, its HPA made), the JobSet controller made the other
    JobSet's Jobs, NodeHealthCheck reports itself paused by the other party. What `before` reads in the
    test is then the controllers' steady state, not a moment of their first passes."""
    await until(lambda: queued_workload(s), lambda w: is_true(w, "Admitted"), f"{QUEUED}'s Workload admitted")
    await until(lambda: s.get(JS, QUEUED, TRAIN), lambda j: j["spec"].get("suspend") is False, f"{QUEUED} running")
    await until(lambda: s.get(CQ_RES, "research-h100"), lambda c: is_true(c, "Active"), "research-h100 active")
    for so in (ROLLOUT, "llm-sts", "llm-ro"):
        await until(lambda so=so: s.get(SO, so, NS), lambda o: is_true(o, "Ready"), f"ScaledObject {so} Ready")
        await until(lambda so=so: hpa(s, so), lambda h: h is not None, f"KEDA's HPA for {so}")
    await until(lambda: jobs_of(s, TRAIN, PLAIN), lambda js: len(js) == 1, f"{PLAIN}'s Job")
    await until(
        lambda: s.get(NHC, "nhc-gpu"),
        lambda n: (n.get("status") or {}).get("reason") == f"NHC is paused: {OTHER_PAUSE}",
        "nhc-gpu paused by the other party",
    )


def unseed(s: KubeAPIServer, objs: list[dict]) -> None:
    """What seeding and the controllers made, gone, waiting on the controllers' finalizers (Kueue's on
    Workloads and queues, KEDA's on ScaledObjects), so the next test's seeds are new objects. No garbage
    collector runs: the JobSets' Jobs and Services, the Workloads, KEDA's HPAs and Argo's ReplicaSets are
    deleted by hand."""
    s.kubectl("delete", JS, PLAIN, QUEUED, "-n", TRAIN, "--ignore-not-found", "--timeout=60s")
    delete_children(s, TRAIN, PLAIN, QUEUED)
    s.kubectl("delete", WL, "--all", "-n", TRAIN, "--ignore-not-found", "--timeout=60s")
    rest = [o for o in objs if o["kind"] != "JobSet"]
    s.kubectl("delete", "-f", "-", "--ignore-not-found", "--timeout=90s", input=yaml.safe_dump_all(rest))
    for so in (ROLLOUT, "llm-sts", "llm-ro"):
        s.delete("horizontalpodautoscaler.autoscaling", f"keda-hpa-{so}", namespace=NS)
    s.kubectl("delete", "replicasets.apps", "-n", NS, "-l", f"app={ROLLOUT}", "--ignore-not-found", "--wait=false")


@pytest.fixture
def policy_overrides() -> dict:
    # rollout-abort's verify waits for Argo and the ReplicaSets' pods: a bound for a busy machine.
    return {"rollout_verify_seconds": 5, "api_timeout_seconds": 5, "rollout_verify_by_rollout": {f"{NS}/{ROLLOUT}": 60}}


@pytest.fixture
async def seeded(deployed: KubeAPIServer, controllers: Controllers) -> AsyncIterator[KubeAPIServer]:
    s = deployed
    for ns in NAMESPACES:
        await asyncio.to_thread(s.namespace, ns)
    objs = seeds()
    try:
        await asyncio.to_thread(s.put, *objs)
        async with follow_replica_sets(s, NS, f"app={ROLLOUT}"):
            await mid_canary(s)
            await settled(s)
            yield s
    finally:
        await asyncio.to_thread(unseed, s, objs)


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


# (command, who pulls it, the object it changes: resource, namespace, name): every lever, each scale-target
# kind keda-pause is granted, and both ways jobset-suspend stops a JobSet (spec.suspend; a Kueue-queued
# one through its Workload, found by Kueue's owner reference).
CQ = (CQ_RES, None, "research-h100")
PULLS = [
    ("lever kueue-hold research-h100 --cell us-east-3", OPS, CQ),
    ("lever kueue-hold-drain research-h100 --cell us-east-3", OPS, CQ),
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS, (SO, NS, "llm-70b")),  # paused=true
    # The count option reads the scale target: a Deployment, a StatefulSet, an Argo Rollout.
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-70b")),
    ("lever keda-pause serve-chat/llm-sts --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-sts")),
    ("lever keda-pause serve-chat/llm-ro --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-ro")),
    ("lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79", OPS, ("node", None, "gpu-a3-0001")),
    ("lever remediation-pause nhc-gpu --cell us-east-3", OPS, (NHC, None, "nhc-gpu")),
    (f"lever jobset-suspend {TRAIN}/{PLAIN} --cell us-east-3", OPS, (JS, TRAIN, PLAIN)),
    (f"lever jobset-suspend {TRAIN}/{QUEUED} --cell us-east-1", OPS, ("workload.kueue.x-k8s.io", TRAIN, None)),
    (
        "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=acme level=read",
        SEC,
        ("configmap", "toolgw", "toolgw-flags"),
    ),
    (
        "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3",
        SEC,
        ("pod", "sbx-tenant-acme", "sess-7f3a9c-0"),
    ),
    (
        "lever route-weight edge/chat-global backend=cell-us-east-1",  # the fleet context
        OPS,
        ("httproute.gateway.networking.k8s.io", "edge", "chat-global"),
    ),
    (f"lever rollout-abort {NS}/{ROLLOUT} --cell us-east-3", MODEL, ("rollout.argoproj.io", NS, ROLLOUT)),  # no undo
]


def test_the_pulls_name_every_lever():
    assert_every_lever((lever_of(command) for command, _, _ in PULLS), "tests/realkube/test_levers_live.py PULLS")


def read_back(s: KubeAPIServer, target: tuple[str, str | None, str | None]) -> dict:
    res, ns, name = target
    if name is None:  # the one Workload in the namespace (Kueue names it by a hash of the owner's uid)
        items = workloads(s)
        assert len(items) == 1, [i["metadata"]["name"] for i in items]
        return items[0]
    return s.get(res, name, ns)


def desired(obj: dict) -> dict:
    """What a lever changes and its undo restores: spec, labels, annotations (not Firebreak's provenance
    annotations, which stay as the record of who changed it), data; not status or bookkeeping."""
    meta = obj["metadata"]
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in PROVENANCE}
    return {"spec": obj.get("spec"), "data": obj.get("data"), "labels": meta.get("labels") or {}, "annotations": ann}


def managers(obj: dict) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or []}


def firebreaks(obj: dict) -> list[dict]:
    """Firebreak's entries in managedFields (with their times): any write of the bot's changes them."""
    return [m for m in obj["metadata"].get("managedFields") or [] if m["manager"] == FIELD_MANAGER]


async def reaction(s: KubeAPIServer, lever: str, pulled: dict, undone: bool) -> None:
    """The controller's own answer to the pull (undone=False) or to its undo, awaited: what makes the
    lever's effect real, beyond the lever's own write. Levers no controller acts on (node-quarantine,
    killswitch, sandbox-quarantine, route-weight) have none: their write is the effect."""
    name = pulled["metadata"]["name"]
    if lever == "kueue-hold":
        if undone:
            await until(lambda: s.get(CQ_RES, name), lambda c: is_true(c, "Active"), "Kueue: queue active again")
        else:
            cq = await until(
                lambda: s.get(CQ_RES, name), lambda c: cond(c, "Active").get("status") == "False", "Kueue: held"
            )
            assert cond(cq, "Active")["reason"] == "Stopped", cond(cq, "Active")
            assert is_true(await asyncio.to_thread(queued_workload, s), "Admitted")  # Hold lets it run on
    elif lever == "kueue-hold-drain":
        if undone:
            await until(lambda: queued_workload(s), lambda w: is_true(w, "Admitted"), "Kueue: readmitted")
            await until(lambda: s.get(JS, QUEUED, TRAIN), lambda j: not j["spec"]["suspend"], "Kueue: JobSet resumed")
        else:
            wl = await until(lambda: queued_workload(s), lambda w: is_true(w, "Evicted"), "Kueue: evicted")
            assert cond(wl, "Evicted")["reason"] == "ClusterQueueStopped", cond(wl, "Evicted")
            await until(lambda: s.get(JS, QUEUED, TRAIN), lambda j: j["spec"]["suspend"], "Kueue: JobSet suspended")
    elif lever == "keda-pause":
        # Paused, KEDA deletes its HPA and stops its scale loop; unpaused, it makes the HPA again. Its
        # Paused condition is not awaited on undo: v2.21.0's first scale-loop pass after an unpause can
        # write back the whole conditions list from its cache, Paused=True included, over the
        # reconciler's Paused=False (pkg/scaling/scale_handler.go handleResult: a merge patch built on
        # a cached read, no optimistic lock), and nothing reconciles it again; seen here.
        count = (pulled["metadata"].get("annotations") or {}).get("autoscaling.keda.sh/paused-replicas")
        if undone:
            await until(lambda: hpa(s, name), lambda h: h is not None, f"KEDA: {name}'s HPA made again")
            await until(
                lambda: s.get(SO, name, NS),
                lambda o: "pausedReplicaCount" not in o["status"],
                f"KEDA: {name}'s paused count cleared",
            )
        else:
            so = await until(lambda: s.get(SO, name, NS), lambda o: is_true(o, "Paused"), f"KEDA: {name} paused")
            assert cond(so, "Paused")["reason"] == "ScaledObjectPaused", cond(so, "Paused")
            await until(lambda: hpa(s, name), lambda h: h is None, f"KEDA: {name}'s HPA deleted")
            if count is not None:
                await until(
                    lambda: s.get(SO, name, NS),
                    lambda o: o["status"].get("pausedReplicaCount") == int(count),
                    f"KEDA: {name} paused at {count}",
                )
    elif lever == "remediation-pause":
        mine = [p for p in pulled["spec"]["pauseRequests"] if p != OTHER_PAUSE]
        want = f"NHC is paused: {','.join([OTHER_PAUSE] if undone else [OTHER_PAUSE, *mine])}"
        await until(lambda: s.get(NHC, name), lambda n: n["status"].get("reason") == want, f"NodeHealthCheck: {want}")
    elif lever == "jobset-suspend" and pulled["kind"] == "JobSet":
        js = await until(
            lambda: s.get(JS, name, TRAIN),
            lambda j: cond(j, "Suspended").get("status") == ("False" if undone else "True"),
            "JobSet: Suspended condition",
        )
        assert cond(js, "Suspended")["reason"] == ("ResumeJobs" if undone else "SuspendedJobs"), cond(js, "Suspended")
        await until(
            lambda: jobs_of(s, TRAIN, name),
            lambda jobs: jobs and all(bool(j["spec"].get("suspend")) is not undone for j in jobs),
            "JobSet: its Jobs follow",
        )
    elif lever == "jobset-suspend":  # the Workload of a queued JobSet
        if undone:
            wl = await until(lambda: queued_workload(s), lambda w: is_true(w, "Admitted"), "Kueue: readmitted")
            assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("True", "Reactivated")
            await until(lambda: s.get(JS, QUEUED, TRAIN), lambda j: not j["spec"]["suspend"], "Kueue: JobSet resumed")
        else:
            wl = await until(lambda: queued_workload(s), lambda w: is_true(w, "Evicted"), "Kueue: deactivated")
            assert cond(wl, "Evicted")["reason"] == "Deactivated", cond(wl, "Evicted")
    elif lever == "rollout-abort":  # what Argo wrote: verify has already waited for it
        st = pulled["status"]
        message = "Rollout aborted update to revision 2"
        assert st["abort"] is True and st["phase"] == "Degraded", st
        assert st["message"] == f"RolloutAborted: {message}", st
        progressing = cond(pulled, "Progressing")
        assert (progressing["status"], progressing["reason"], progressing["message"]) == (
            "False", "RolloutAborted", message,
        ), st["conditions"]  # fmt: skip
        status_managers = {
            m["manager"] for m in pulled["metadata"]["managedFields"] if m.get("subresource") == "status"
        }
        assert {FIELD_MANAGER, ARGO} <= status_managers, status_managers  # the abort is ours, the rest Argo's
        sets = await asyncio.to_thread(by_hash, s)
        stable, canary = st["stableRS"], st["currentPodHash"]
        assert (sets[stable]["spec"]["replicas"], sets[canary]["spec"]["replicas"]) == (8, 0), sets.keys()


async def test_every_lever_pulls_verifies_and_undoes_as_the_bots_serviceaccount(app, seeded, controllers: Controllers):
    s: KubeAPIServer = seeded
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3", "us-east-1"), roles={"ops": OPS, "model": MODEL, "security": SEC})
    store = lever_store(app.services)

    for command, user, target in PULLS:
        lever = command.split()[1]
        before = await asyncio.to_thread(read_back, s, target)
        dry = await say(app, f"{command} --dry-run", user, inc.channel_id, timeout=30)
        assert "(dry run)" in dry and "Nothing was changed" in dry, dry
        planned = await store.get(req_of(dry))
        assert planned.result["ok"] is True, (command, planned.result)  # the real server accepted each call
        after_dry = await asyncio.to_thread(read_back, s, target)
        # Nothing stored by the bot (a controller may write the status meanwhile: not resourceVersion).
        assert firebreaks(after_dry) == firebreaks(before), command
        assert desired(after_dry) == desired(before), command

        asked.clear()
        out = await say(app, command, user, inc.channel_id, timeout=90)
        req = req_of(out)
        if asked:  # needs approval: the IC approves
            assert "needs approval" in out, out
            rec = asked[-1]
            assert await store.transition(rec.id, {"pending_approval"}, "approved", approved_by="U_IC")
            out = (await execute_approved(app.services, rec.id, "U_IC")).message
        rec = await store.get(req)
        assert rec.state == "done" and rec.result.get("verified") is True, (command, out, rec.result)

        pulled = await asyncio.to_thread(read_back, s, target)
        assert FIELD_MANAGER in managers(pulled), (command, managers(pulled))
        assert (pulled["metadata"].get("annotations") or {}).get("firebreak.io/request") == req, command
        await reaction(s, lever, pulled, undone=False)
        if lever == "rollout-abort":  # the status subresource only, and no undo: re-promoting is a deploy
            assert not before["status"].get("abort") and before["status"]["phase"] == "Paused", before["status"]
            continue
        assert desired(pulled) != desired(before), f"{command}: nothing changed on the server"
        if not LEVERS[rec.lever].reversible:  # killswitch: only narrows; a person puts it back
            undo = await app.run(f"undo {req}", user=user, channel=inc.channel_id)
            assert "can't be undone by Firebreak" in undo and "To put it back: `kubectl" in undo, undo
            continue
        undo = await app.run(f"undo {req}", user=user, channel=inc.channel_id)
        gate = re.search(r"needs the IC's approval: (REQ-\d+) is on the approval card", undo)
        if gate:  # node-quarantine's return gate: this Prometheus has no DCGM series for the fleet context
            undo = await app.reply(
                await app.press("lever.approve", gate.group(1), user="U_IC", channel=inc.channel_id), timeout=30
            )
        assert "undone" in undo and (await store.get(req)).state == "undone", undo
        restored = await asyncio.to_thread(read_back, s, target)
        assert desired(restored) == desired(before), command
        await reaction(s, lever, restored, undone=True)


async def test_the_bots_serviceaccount_cannot_read_secrets(deployed: KubeAPIServer):
    """A real 403 from the server's RBAC, on the bot's own token, in its namespace and cluster-wide."""
    s = deployed
    ctx = ssl.create_default_context(cafile=str(s.ca_file))
    headers = {"Authorization": f"Bearer {s.bot_token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for path in (f"/api/v1/namespaces/{BOT_NS}/secrets", "/api/v1/secrets", f"/api/v1/namespaces/{NS}/secrets/x"):
            async with http.get(s.url + path, ssl=ctx) as r:
                body = await r.json()
                assert r.status == 403, (path, r.status, body)
                assert body["reason"] == "Forbidden"
                assert f'User "system:serviceaccount:{BOT_NS}:{BOT_SA}" cannot ' in body["message"], body
                assert 'resource "secrets"' in body["message"], body
    can = await asyncio.to_thread(
        s.kubectl, "auth", "can-i", "get", "secrets", "-A", kubeconfig=s.bot_kubeconfig, check=False
    )
    assert can.strip() == "no"


async def until_can_i(s: KubeAPIServer, want: bool, *args: str, seconds: float = 10.0) -> None:
    """RBAC changes reach the authorizer through its informer, not at once: wait for the answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        out = await asyncio.to_thread(s.kubectl, "auth", "can-i", *args, kubeconfig=s.bot_kubeconfig, check=False)
        if (out.strip() == "yes") is want:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"can-i {' '.join(args)} is not {want} after {seconds}s")


async def test_without_its_rule_a_lever_gets_the_real_servers_403(app, seeded):
    """The negative control: deploy/'s Role in serve-chat less `rollouts/status`, and rollout-abort is refused by
    the real server's RBAC, naming what is missing, and nothing is stored (so the test above would catch a
    missing verb). The Role is re-applied from deploy/ afterwards."""
    s: KubeAPIServer = seeded
    role = await asyncio.to_thread(s.get, "role", "firebreak", NS)  # namespaced needs: a Role per namespace
    [i] = [n for n, r in enumerate(role["rules"]) if r.get("resources") == ["rollouts/status"]]
    ops = [
        {"op": "test", "path": f"/rules/{i}/resources", "value": ["rollouts/status"]},
        {"op": "remove", "path": f"/rules/{i}"},
    ]
    await asyncio.to_thread(s.kubectl, "patch", "role", "firebreak", "-n", NS, "--type", "json", "-p", json.dumps(ops))
    try:
        await until_can_i(s, False, "patch", "rollouts.argoproj.io", "--subresource", "status", "-n", NS)
        before = await asyncio.to_thread(s.get, "rollout.argoproj.io", "llm-70b", NS)
        asked = []

        async def ask(svc, inc, rec):
            asked.append(rec)

        replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
        inc = await app.declare(roles={"model": MODEL})
        command = "lever rollout-abort serve-chat/llm-70b --cell us-east-3"
        out = await say(app, command, MODEL, inc.channel_id, timeout=30)
        if asked:  # one server is the cell and the fleet context (overlays/example): fleet-wide, approved
            store = lever_store(app.services)
            assert await store.transition(asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC")
            out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
        assert "403" in out and 'cannot patch resource "rollouts/status"' in out, out
        assert (await lever_store(app.services).get(req_of(out))).state != "done"
        after = await asyncio.to_thread(s.get, "rollout.argoproj.io", "llm-70b", NS)
        assert not after["status"].get("abort") and after["status"] == before["status"]
    finally:
        await asyncio.to_thread(s.apply_k, DEPLOY / OVERLAY)
    await until_can_i(s, True, "patch", "rollouts.argoproj.io", "--subresource", "status", "-n", NS)
