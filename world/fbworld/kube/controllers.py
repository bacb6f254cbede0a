"""Opt-in controllers for the fake cluster: the parts of Kueue and Argo Rollouts that the levers
depend on, so a lever that works here keeps working when the real controller reacts.

A test starts one with `cluster.start_controller("kueue" | "argo", interval=...)`. Each tick reads
and writes the store directly (synchronously, so no request interleaves with a reconcile) through
the same Objects code the HTTP handlers use: resourceVersion, generation and managedFields move as
they would for the real controller's writes.

Upstream references (by function, so they can be re-checked):
- Kueue v0.19.2: jobframework.GetWorkloadNameForOwnerWithGVK / ConstructWorkload / NewWorkload
  (Workload name, labels, owner reference), jobset.PodSets / podsCount (podSets),
  workload.SetQuotaReservation / SyncAdmittedCondition (admission), WorkloadReconciler.Reconcile's
  inactive branch + evict.Evict (Evicted/Deactivated), JobReconciler.ReconcileGenericJob steps 6-7
  (stop the job on eviction, clear the admission, restart an admitted suspended job),
  WorkloadReconciler's Requeued/Reactivated on reactivation.
- Argo Rollouts v1.9.1: pauseContext.CalculateAbortStatus (abort, abortedAt), newRolloutContext's
  RemoveAbort on a fully promoted rollout (rollout/controller.go, rolloututil.IsFullyPromoted),
  rolloutContext.calculateRolloutConditions (Progressing=False RolloutAborted, RolloutAbortedMessage),
  rolloututil.CalculateRolloutPhase (Degraded + "<reason>: <message>"), syncRolloutStatusCanary
  (currentStepIndex on abort), reconcileActiveService (blue-green active selector -> stableRS).
- KEDA v2.20.2: ScaledObject.NeedToBePausedByAnnotation / getBoolAnnotation / GetPausedReplicaCount
  (apis/keda/v1alpha1/scaledobject_types.go), ScaledObjectReconciler.reconcileScaledObject's pause
  switch, handlePause, scaleTargetToPausedCount, syncPausedReplicaCountStatus
  (controllers/keda/scaledobject_controller.go), getHPAName (controllers/keda/hpa.go).
"""

from __future__ import annotations

import abc
import asyncio
import copy
import hashlib
from datetime import UTC, datetime
from typing import Any

from .objects import Objects, WriteOpts
from .resources import Registry, ResourceType
from .storage import Store

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # controllerconsts.QueueLabel
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # controllerconsts.JobUIDLabel
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"  # jobsetapi.GroupVersion, the GVK Kueue hashes
POD_TEMPLATE_HASH = "rollouts-pod-template-hash"  # v1alpha1.DefaultRolloutUniqueLabelKey
REVISION_ANNOTATION = "rollout.argoproj.io/revision"  # annotations.RevisionAnnotation
_MAX_PREFIX = 253 - 1 - 5  # longMaxWorkloadNameLength - "-" - hashLength (ShortWorkloadNames is off)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ Kueue helpers


def workload_name(owner_name: str, owner_uid: str, kind: str = "JobSet", group: str = "jobset.x-k8s.io") -> str:
    """jobframework.GetWorkloadNameForOwnerWithGVK: "<kind>-<name>" truncated, "-", 5 hex of
    sha1(kind, group, name, uid)."""
    prefix = (kind.lower() + "-" + owner_name)[:_MAX_PREFIX]
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    return f"{prefix}-{digest[:5]}"


def jobset_pod_sets(jobset: dict) -> list[dict]:
    """jobset.PodSets: one podSet per replicatedJob, count = replicas * min(parallelism, completions)."""
    out = []
    for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (rj.get("template") or {}).get("spec") or {}
        per_replica = job_spec.get("parallelism", 1)
        completions = job_spec.get("completions", per_replica)
        per_replica = min(per_replica, completions)
        out.append(
            {
                "name": rj["name"],
                "count": rj.get("replicas", 1) * per_replica,
                "template": copy.deepcopy(job_spec.get("template") or {}),
            }
        )
    return out


def set_condition(
    conditions: list[dict], ctype: str, status: str, reason: str, message: str, generation: int | None
) -> bool:
    """apimeta.SetStatusCondition: lastTransitionTime moves only when the status changes."""
    new: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message}
    if generation is not None:
        new["observedGeneration"] = generation
    for c in conditions:
        if c.get("type") == ctype:
            changed = False
            if c.get("status") != status:
                c["status"], c["lastTransitionTime"] = status, now()
                changed = True
            for k in ("reason", "message", "observedGeneration"):
                if k in new and c.get(k) != new[k]:
                    c[k] = new[k]
                    changed = True
            return changed
    conditions.append({**new, "lastTransitionTime": now()})
    return True


def condition(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(obj: dict, ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def admit(workload: dict, cluster_queue: str) -> bool:
    """workload.SetQuotaReservation + SyncAdmittedCondition (no admission checks): the workload gets
    status.admission, QuotaReserved=True, Admitted=True, and a true Evicted/Preempted turns False."""
    status = workload.setdefault("status", {})
    gen = workload.get("metadata", {}).get("generation")
    conds = status.setdefault("conditions", [])
    status["admission"] = {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [
            {"name": ps["name"], "count": ps.get("count", 1)} for ps in workload["spec"].get("podSets") or []
        ],
    }
    set_condition(
        conds, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}", gen
    )
    for ctype in ("Evicted", "Preempted"):  # resetActiveCondition
        prev = condition(workload, ctype)
        if prev is not None and prev.get("status") == "True":
            set_condition(conds, ctype, "False", "QuotaReserved", "Previously: " + prev.get("message", ""), gen)
    set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted", gen)
    return True


def build_workload(jobset: dict, version: str = "v1beta2") -> dict:
    """jobframework.ConstructWorkload for a JobSet: name, job-uid label, controller owner reference,
    queueName and podSets. spec.active is left unset; the CRD defaults it to true.
    The upstream kueue.x-k8s.io/resource-in-use finalizer is left out: the fake has no finalizer
    semantics, so a delete would otherwise keep a half-deleted object forever."""
    meta = jobset["metadata"]
    uid = meta.get("uid")
    if not uid:
        raise ValueError("the JobSet has no metadata.uid: seed it first (cluster.put returns it with one)")
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(meta["name"], uid),
            "namespace": meta.get("namespace", "default"),
            "labels": {JOB_UID_LABEL: uid},
            "ownerReferences": [
                {
                    "apiVersion": JOBSET_API_VERSION,
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": (meta.get("labels") or {}).get(QUEUE_LABEL, ""),
            "podSets": jobset_pod_sets(jobset),
        },
    }


# ------------------------------------------------------------------ controllers


class Controller(abc.ABC):
    """A reconcile loop over the fake's store. `reconcile()` runs one pass synchronously."""

    name = "controller"

    def __init__(self, registry: Registry, objects: Objects, store: Store):
        self.registry = registry
        self.objects = objects
        self.store = store
        self.passes = 0
        self._task: asyncio.Task | None = None

    def start(self, interval: float) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(interval), name=f"fake-kube-{self.name}")

    async def _run(self, interval: float) -> None:
        while True:
            self.reconcile()
            self.passes += 1
            await asyncio.sleep(interval)

    async def stop(self) -> BaseException | None:
        """Cancel the loop; return the exception it died of, if it crashed."""
        task, self._task = self._task, None
        if task is None:
            return None
        if task.done():
            return None if task.cancelled() else task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return None
        return None

    @abc.abstractmethod
    def reconcile(self) -> None:
        """One pass over the objects this controller owns (called every ``interval``)."""

    # helpers: read/write in the storage version, as the controller's typed client would
    def _type(self, name: str) -> ResourceType | None:
        try:
            return self.registry.by_name(name)
        except KeyError:
            return None

    def _items(self, rt: ResourceType, ns: str | None = None) -> list[dict]:
        return [self.registry.convert(rt, o, rt.storage_version) for o in self.store.items(rt, ns)]

    def _write(self, rt: ResourceType, obj: dict, manager: str, sub: str | None = None) -> dict:
        meta = obj["metadata"]
        return self.objects.replace(
            rt, rt.storage_version, meta.get("namespace"), meta["name"], obj, sub, WriteOpts(manager=manager)
        )


def workload_step(wl: dict[str, Any], js: dict[str, Any], cluster_queue: str) -> bool | None:
    """One pass of Kueue's jobframework reconciler over a JobSet's Workload, in place on `wl`:
    admit an active one, evict and release a deactivated one. Returns the JobSet's wanted
    spec.suspend, or None to leave it."""
    gen = wl["metadata"].get("generation")
    conds = wl.setdefault("status", {}).setdefault("conditions", [])
    suspended = bool((js.get("spec") or {}).get("suspend"))
    js_active = any((s.get("active") or 0) > 0 for s in (js.get("status") or {}).get("replicatedJobsStatus") or [])
    want_suspend: bool | None = None
    if (wl.get("spec") or {}).get("active", True) is not False:
        requeued = condition(wl, "Requeued")
        if requeued and requeued.get("status") == "False" and requeued.get("reason") == "Deactivated":
            set_condition(conds, "Requeued", "True", "Reactivated", "The workload was reactivated", gen)
        if not is_true(wl, "QuotaReserved"):
            admit(wl, cluster_queue)
        if is_true(wl, "Admitted") and suspended:
            want_suspend = False  # startJob: an admitted job runs
    else:
        message = "The workload is deactivated"
        if not is_true(wl, "Evicted"):
            set_condition(conds, "Evicted", "True", "Deactivated", message, gen)
        evicted_message = (condition(wl, "Evicted") or {}).get("message", message)
        if not suspended:
            want_suspend = True  # stopJob
            suspended = True
        if is_true(wl, "QuotaReserved") and not js_active:
            # The job stopped: release the quota (UnsetQuotaReservationWithCondition, reason
            # "Pending" while UnadmittedWorkloadsObservability is off, its v0.19 default).
            set_condition(conds, "Requeued", "False", "Deactivated", evicted_message, gen)
            set_condition(conds, "QuotaReserved", "False", "Pending", evicted_message, gen)
            wl["status"].pop("admission", None)
            set_condition(conds, "Admitted", "False", "NoReservation", "The workload has no reservation", gen)
    return want_suspend


class KueueController(Controller):
    """Kueue's job framework for JobSets plus an always-admitting scheduler."""

    name = "kueue"
    JOB_MANAGER = "manager"  # Kueue's binary; its non-apply writes carry that User-Agent prefix
    STATUS_MANAGER = "kueue-admission"  # constants.AdmissionName (Kueue writes status with SSA)

    def __init__(self, registry: Registry, objects: Objects, store: Store):
        super().__init__(registry, objects, store)
        # LocalQueue name -> ClusterQueue name. The fake has no LocalQueue type; without an entry a
        # workload is admitted to the first ClusterQueue stored (or to one named like its queue).
        self.cluster_queues: dict[str, str] = {}

    def _cluster_queue(self, queue: str) -> str:
        if queue in self.cluster_queues:
            return self.cluster_queues[queue]
        cq_rt = self._type("clusterqueues.kueue.x-k8s.io")
        names = [o["metadata"]["name"] for o in self.store.items(cq_rt)] if cq_rt else []
        return queue if queue in names or not names else names[0]

    def reconcile(self) -> None:
        js_rt, wl_rt = self._type("jobsets.jobset.x-k8s.io"), self._type("workloads.kueue.x-k8s.io")
        if js_rt is None or wl_rt is None:
            return
        jobsets = {o["metadata"]["uid"]: o for o in self._items(js_rt)}
        for wl in self._items(wl_rt):
            owner = next((r for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            if owner and owner.get("kind") == "JobSet" and owner.get("uid") not in jobsets:
                # The garbage collector removes a Workload whose owning JobSet is gone.
                self.store.delete(wl_rt, wl["metadata"]["namespace"], wl["metadata"]["name"])
        for js in jobsets.values():
            if QUEUE_LABEL in (js["metadata"].get("labels") or {}):
                self._reconcile_jobset(js_rt, wl_rt, js)

    def _owned_workload(self, wl_rt: ResourceType, js: dict) -> dict | None:
        uid = js["metadata"]["uid"]
        for wl in self._items(wl_rt, js["metadata"]["namespace"]):
            if any(r.get("uid") == uid and r.get("controller") for r in wl["metadata"].get("ownerReferences") or []):
                return wl
        return None

    def _reconcile_jobset(self, js_rt: ResourceType, wl_rt: ResourceType, js: dict) -> None:
        wl = self._owned_workload(wl_rt, js)
        if wl is None:
            body = build_workload(js, wl_rt.storage_version)
            wl = self.objects.create(
                wl_rt, wl_rt.storage_version, body["metadata"]["namespace"], body, WriteOpts(manager=self.JOB_MANAGER)
            )
        status_before = copy.deepcopy(wl.get("status") or {})
        want_suspend = workload_step(wl, js, self._cluster_queue(wl["spec"].get("queueName", "")))
        if wl["status"] != status_before:
            self._write(wl_rt, wl, self.STATUS_MANAGER, "status")
        if want_suspend is not None:
            js["spec"]["suspend"] = want_suspend
            self._write(js_rt, js, self.JOB_MANAGER)


def abort_status(ro: dict[str, Any], sets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The Rollout's status once Argo has handled status.abort (ArgoController below): Progressing=False
    RolloutAborted, phase Degraded, counts from the ReplicaSets, weights back to stable."""
    spec, status = ro.get("spec") or {}, copy.deepcopy(ro.get("status") or {})
    strategy = spec.get("strategy") or {}
    stable, current = status.get("stableRS"), status.get("currentPodHash")
    revision = int((ro["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) or 0)
    message = f"Rollout aborted update to revision {revision}"
    status["abort"] = True
    status.setdefault("abortedAt", now())
    status.pop("pauseConditions", None)
    conds = status.setdefault("conditions", [])
    prog = next((c for c in conds if c.get("type") == "Progressing"), None)
    if prog is None or (prog.get("status"), prog.get("reason"), prog.get("message")) != (
        "False",
        "RolloutAborted",
        message,
    ):
        # conditions.SetRolloutCondition replaces the condition; NewRolloutCondition stamps both times.
        conds[:] = [c for c in conds if c.get("type") != "Progressing"]
        t = now()
        conds.append(
            {
                "type": "Progressing",
                "status": "False",
                "reason": "RolloutAborted",
                "message": message,
                "lastUpdateTime": t,
                "lastTransitionTime": t,
            }
        )
    status["phase"], status["message"] = "Degraded", f"RolloutAborted: {message}"
    counts = [(h, (rs.get("status") or {}).get("replicas", 0)) for h, rs in sets.items()]
    status["replicas"] = sum(n for _, n in counts)
    status["HPAReplicas"] = status["replicas"]
    status["updatedReplicas"] = sum(n for h, n in counts if h == current)
    status["readyReplicas"] = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in sets.values())
    status["availableReplicas"] = sum((rs.get("status") or {}).get("availableReplicas", 0) for rs in sets.values())
    status["observedGeneration"] = str(ro["metadata"].get("generation", 1))
    canary = strategy.get("canary")
    if canary is not None:
        steps = canary.get("steps") or []
        if steps:
            status["currentStepIndex"] = len(steps) if stable == current else 0
        if canary.get("trafficRouting"):
            weights = (status.get("canary") or {}).get("weights") or {}
            status.setdefault("canary", {})["weights"] = {
                "canary": {
                    **(weights.get("canary") or {}),
                    "weight": 0,
                    "podTemplateHash": current,
                    **({"serviceName": canary["canaryService"]} if canary.get("canaryService") else {}),
                },
                "stable": {
                    **(weights.get("stable") or {}),
                    "weight": 100,
                    "podTemplateHash": stable,
                    **({"serviceName": canary["stableService"]} if canary.get("stableService") else {}),
                },
            }
    if strategy.get("blueGreen") is not None and stable:
        status.setdefault("blueGreen", {})["activeSelector"] = stable
    return status


class ArgoController(Controller):
    """Argo Rollouts' handling of an aborted rollout (status.abort: true)."""

    name = "argo"
    MANAGER = "rollouts-controller"  # the controller binary's User-Agent prefix

    def reconcile(self) -> None:
        ro_rt, rs_rt = self._type("rollouts.argoproj.io"), self._type("replicasets.apps")
        if ro_rt is None or rs_rt is None:
            return
        for ro in self._items(ro_rt):
            status = ro.get("status") or {}
            if status.get("abort") is not True:
                continue
            if status.get("stableRS") and status.get("stableRS") == status.get("currentPodHash"):
                self._remove_abort(ro_rt, ro)
            else:
                self._abort(ro_rt, rs_rt, ro)

    def _remove_abort(self, ro_rt: ResourceType, ro: dict) -> None:
        """A fully promoted rollout (utils/rollout/rolloututil.go IsFullyPromoted: stableRS ==
        currentPodHash) has nothing to abort: rollout/controller.go newRolloutContext calls
        pauseContext.RemoveAbort ("Removing abort condition from fully promoted rollout"), and
        rollout/pause.go CalculateAbortStatus then writes abort=false and drops abortedAt. Nothing
        else changes: the phase stays what it was (Healthy)."""
        ro["status"]["abort"] = False
        ro["status"].pop("abortedAt", None)
        self._write(ro_rt, ro, self.MANAGER, "status")

    def _replica_sets(self, rs_rt: ResourceType, ro: dict) -> dict[str, dict]:
        """This rollout's ReplicaSets by pod-template hash: owned by it, or (unowned) matching its selector."""
        meta = ro["metadata"]
        selector = ((ro.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        out = {}
        for rs in self._items(rs_rt, meta["namespace"]):
            labels = rs["metadata"].get("labels") or {}
            refs = rs["metadata"].get("ownerReferences") or []
            owned = any(r.get("kind") == "Rollout" and r.get("name") == meta["name"] for r in refs)
            if POD_TEMPLATE_HASH in labels and (
                owned or (not refs and selector and all(labels.get(k) == v for k, v in selector.items()))
            ):
                out[labels[POD_TEMPLATE_HASH]] = rs
        return out

    def _scale(self, rs_rt: ResourceType, rs: dict, replicas: int) -> dict:
        """The rollout controller sets spec.replicas; the ReplicaSet controller then reports the pods
        (the fake makes them ready and available at once)."""
        if rs["spec"].get("replicas") != replicas:
            rs["spec"]["replicas"] = replicas
            rs = self._write(rs_rt, rs, self.MANAGER)
        status = {
            **(rs.get("status") or {}),
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        if status != rs.get("status"):
            rs["status"] = status
            rs = self._write(rs_rt, rs, "replicaset-controller", "status")
        return rs

    def _abort(self, ro_rt: ResourceType, rs_rt: ResourceType, ro: dict) -> None:
        spec, status = ro.get("spec") or {}, copy.deepcopy(ro.get("status") or {})
        strategy = spec.get("strategy") or {}
        desired = spec.get("replicas", 1)
        stable, current = status.get("stableRS"), status.get("currentPodHash")
        sets = self._replica_sets(rs_rt, ro)
        if stable in sets:
            sets[stable] = self._scale(rs_rt, sets[stable], desired)
        canary = strategy.get("canary")
        if canary is not None and current in sets and current != stable:
            # The aborted canary's pods go away (basic canary at once; with traffic routing Argo
            # waits abortScaleDownDelaySeconds, 30 s by default: the fake does not wait).
            sets[current] = self._scale(rs_rt, sets[current], 0)

        status = abort_status(ro, sets)
        if status != ro.get("status"):
            ro["status"] = status
            self._write(ro_rt, ro, self.MANAGER, "status")


PAUSED = "autoscaling.keda.sh/paused"  # v1alpha1.PausedAnnotation
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"  # v1alpha1.PausedReplicasAnnotation
PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"  # v1alpha1.PausedScaleInAnnotation
PAUSED_SCALE_OUT = "autoscaling.keda.sh/paused-scale-out"  # v1alpha1.PausedScaleOutAnnotation


def _bool_annotation(annotations: dict, key: str) -> bool:
    """getBoolAnnotation: absent is false; a value strconv.ParseBool can't read is taken as true."""
    if key not in annotations:
        return False
    value = annotations[key]
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    return value not in ("0", "f", "F", "FALSE", "false", "False")


class KedaController(Controller):
    """KEDA's ScaledObject pause handling. Unpaused, KEDA keeps an HPA named keda-hpa-<name> (or
    spec.advanced.horizontalPodAutoscalerConfig.name) scaling the target; the fake's HPA does not scale.
    Paused (paused-replicas present, or paused parses true), KEDA sets the Paused condition, stops
    its scale loop and deletes the HPA; with paused-replicas it also scales the target to that count
    through /scale, and records status.pausedReplicaCount. paused=true alone freezes the target at
    whatever it has. Unpaused again: Paused=False "ScaledObjectUnpaused", pausedReplicaCount cleared,
    the HPA back."""

    name = "keda"
    MANAGER = "keda"  # the operator binary's User-Agent prefix

    def reconcile(self) -> None:
        so_rt, hpa_rt = self._type("scaledobjects.keda.sh"), self._type("horizontalpodautoscalers.autoscaling")
        if so_rt is None or hpa_rt is None:
            return
        for so in self._items(so_rt):
            self._reconcile(so_rt, hpa_rt, so)

    @staticmethod
    def hpa_name(so: dict) -> str:
        advanced = (so.get("spec") or {}).get("advanced") or {}
        return (
            (advanced.get("horizontalPodAutoscalerConfig") or {}).get("name")
        ) or f"keda-hpa-{so['metadata']['name']}"

    def _reconcile(self, so_rt: ResourceType, hpa_rt: ResourceType, so: dict) -> None:
        meta = so["metadata"]
        ns, annotations = meta["namespace"], meta.get("annotations") or {}
        status = copy.deepcopy(so.get("status") or {})
        conds = status.setdefault("conditions", [])
        paused_now = any(c.get("type") == "Paused" and c.get("status") == "True" for c in conds)
        count = annotations.get(PAUSED_REPLICAS)
        if count is not None or _bool_annotation(annotations, PAUSED):
            _keda_condition(conds, "True", "ScaledObjectPaused", "ScaledObject is paused")
            if self.store.get(hpa_rt, ns, self.hpa_name(so)) is not None:
                self.store.delete(hpa_rt, ns, self.hpa_name(so))
            if count is not None:
                try:
                    replicas = int(count)
                except ValueError:
                    return  # "failed to parse paused replica count": KEDA reconciles no further
                self._scale_target(so, replicas)
                status["pausedReplicaCount"] = replicas
            else:
                status.pop("pausedReplicaCount", None)
        elif _bool_annotation(annotations, PAUSED_SCALE_IN) or _bool_annotation(annotations, PAUSED_SCALE_OUT):
            _keda_condition(conds, "True", "ScaledObjectPaused", "ScaledObject is paused")
            self._ensure_hpa(hpa_rt, so)
        else:
            if paused_now:
                _keda_condition(conds, "False", "ScaledObjectUnpaused", "pause annotation removed for ScaledObject")
                status.pop("pausedReplicaCount", None)
            self._ensure_hpa(hpa_rt, so)
        if status != (so.get("status") or {}):
            so["status"] = status
            self._write(so_rt, so, self.MANAGER, "status")

    def _target_type(self, so: dict) -> ResourceType | None:
        ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
        api_version, kind = ref.get("apiVersion") or "apps/v1", ref.get("kind") or "Deployment"
        group, _, version = api_version.rpartition("/")
        return next(
            (rt for rt in self.registry.types if rt.group == group and rt.kind == kind and version in rt.versions),
            None,
        )

    def _scale_target(self, so: dict, replicas: int) -> None:
        rt = self._target_type(so)
        name = ((so.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        ns = so["metadata"]["namespace"]
        if rt is None or rt.scale is None or not name or self.store.get(rt, ns, name) is None:
            return  # "failed to get scale for target resource"
        if self.objects.read_scale(rt, ns, name)["spec"]["replicas"] == replicas:
            return
        scale = self.objects.read_scale(rt, ns, name)
        scale["spec"]["replicas"] = replicas
        self.objects.replace(rt, rt.storage_version, ns, name, scale, "scale", WriteOpts(manager=self.MANAGER))

    def _ensure_hpa(self, hpa_rt: ResourceType, so: dict) -> None:
        ns, name = so["metadata"]["namespace"], self.hpa_name(so)
        if self.store.get(hpa_rt, ns, name) is not None:
            return
        spec = so.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        body = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"scaledobject.keda.sh/name": so["metadata"]["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "keda.sh/v1alpha1",
                        "kind": "ScaledObject",
                        "name": so["metadata"]["name"],
                        "uid": so["metadata"].get("uid", ""),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": ref.get("apiVersion") or "apps/v1",
                    "kind": ref.get("kind") or "Deployment",
                    "name": ref.get("name", ""),
                },
                "minReplicas": spec.get("minReplicaCount", 1) or 1,
                "maxReplicas": spec.get("maxReplicaCount", 100),
            },
        }
        self.objects.create(hpa_rt, hpa_rt.storage_version, ns, body, WriteOpts(manager=self.MANAGER))


def _keda_condition(conds: list[dict], status: str, reason: str, message: str) -> None:
    """Conditions.SetPausedCondition: KEDA's conditions are type, status, reason, message (no times)."""
    for c in conds:
        if c.get("type") == "Paused":
            c.update(status=status, reason=reason, message=message)
            return
    conds.append({"type": "Paused", "status": status, "reason": reason, "message": message})


CONTROLLERS: dict[str, type[Controller]] = {"kueue": KueueController, "argo": ArgoController, "keda": KedaController}
