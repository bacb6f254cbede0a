"""Kueue's JobSet integration, Argo Rollouts' abort handling and KEDA's pause, against a real
kube-apiserver: the parts of those controllers the levers depend on, so a lever verified on the
real server is verified against what the real controller would do there.

Each pass lists over the REST API and writes with PUT and the object's resourceVersion (optimistic
concurrency, as the upstream controllers' Update calls): a 409 (someone wrote in between, e.g. a
lever) skips that object until the next pass, as a controller's requeue does. Writes carry the
upstream controllers' field managers, so managedFields read as in a real cluster.

Upstream references (by function): the same as fbworld.kube.controllers for Kueue v0.19.2 and Argo
Rollouts v1.9.1, whose pure parts (Workload name and podSets, admission, conditions) are reused;
KEDA v2.20: ScaledObjectReconciler.reconcileScaledObject's pause switch (NeedToBePausedByAnnotation,
checkIfTargetResourceReachPausedCount, SetPausedCondition "ScaledObjectPaused" / "ScaledObjectUnpaused",
"pause annotation removed for ScaledObject"), scaleExecutor's paused-replicas scaling through /scale and
status.pausedReplicaCount.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from fbworld.kube.controllers import (
    POD_TEMPLATE_HASH,
    QUEUE_LABEL,
    abort_status,
    build_workload,
    is_true,
    set_condition,
    workload_step,
)

Obj = dict[str, Any]
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"  # the Workload and ClusterQueue CRDs' storage version
ROLLOUTS = "/apis/argoproj.io/v1alpha1"
KEDA = "/apis/keda.sh/v1alpha1"
PAUSED = "autoscaling.keda.sh/paused"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"


class Conflict(Exception):
    """The next pass retries: 409 or 404 on a write (the object moved on since this pass read it), or
    429 (the server asks to come back: e.g. "storage is (re)initializing" just after a CRD is
    established), as controller-runtime requeues."""


class RealKube:
    """A small REST client for one API server: bearer token, the server's CA."""

    def __init__(self, url: str, token: str, ca_file: Path) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RealKube:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=aiohttp.ClientTimeout(total=10))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _call(self, method: str, path: str, body: Obj | None = None, manager: str | None = None) -> Obj:
        assert self._session is not None, "use RealKube as an async context manager"
        params = {"fieldManager": manager} if manager else None
        async with self._session.request(method, self.url + path, json=body, params=params, ssl=self._ssl) as r:
            data = await r.json(content_type=None)
            if r.status == 429 or (r.status in (404, 409) and method != "GET"):
                raise Conflict(f"{method} {path}: {r.status} {data.get('message')}")
            if r.status >= 400:
                raise RuntimeError(f"{method} {path}: {r.status} {data.get('message')}")
            return dict(data)

    async def get(self, path: str) -> Obj | None:
        try:
            return await self._call("GET", path)
        except RuntimeError as e:
            if ": 404 " in str(e):
                return None
            raise

    async def list(self, path: str) -> list[Obj]:
        return list((await self._call("GET", path)).get("items") or [])

    async def create(self, path: str, body: Obj, manager: str) -> Obj:
        return await self._call("POST", path, body, manager)

    async def put(self, path: str, body: Obj, manager: str) -> Obj:
        return await self._call("PUT", path, body, manager)

    async def delete(self, path: str) -> None:
        with contextlib.suppress(Conflict):  # already gone
            await self._call("DELETE", path)


def _path(base: str, plural: str, obj: Obj, sub: str = "") -> str:
    meta = obj["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{base}{ns}/{plural}/{meta['name']}" + (f"/{sub}" if sub else "")


class Reconciler:
    name = "controller"

    def __init__(self, kube: RealKube) -> None:
        self.kube = kube
        self.passes = 0

    async def reconcile(self) -> None:
        raise NotImplementedError

    async def pass_(self) -> None:
        with contextlib.suppress(Conflict):  # requeued: the next pass
            await self.reconcile()


class KueueJobSets(Reconciler):
    """Kueue's job framework for JobSets (kueue.x-k8s.io/queue-name) plus an always-admitting scheduler:
    a Workload per JobSet, admitted to a ClusterQueue; `spec.active: false` evicts it (Evicted
    Deactivated), suspends the JobSet and releases the quota; reactivated, it is admitted again and
    the JobSet resumes. (fbworld.kube.controllers.KueueController, against the real server.)"""

    name = "kueue"
    JOB_MANAGER = "manager"  # Kueue's binary; its Update calls carry that User-Agent prefix
    STATUS_MANAGER = "kueue-admission"  # constants.AdmissionName

    async def reconcile(self) -> None:
        jobsets = {js["metadata"]["uid"]: js for js in await self.kube.list(f"{JOBSETS}/jobsets")}
        workloads = await self.kube.list(f"{KUEUE}/workloads")
        for wl in workloads:
            owner = next((r for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            if owner and owner.get("kind") == "JobSet" and owner.get("uid") not in jobsets:
                # The garbage collector's job: none runs beside this API server.
                await self.kube.delete(_path(KUEUE, "workloads", wl))
        queues = [cq["metadata"]["name"] for cq in await self.kube.list(f"{KUEUE}/clusterqueues")]
        for js in jobsets.values():
            if QUEUE_LABEL not in (js["metadata"].get("labels") or {}):
                continue
            owned = [
                wl
                for wl in workloads
                if any(
                    r.get("uid") == js["metadata"]["uid"] and r.get("controller")
                    for r in wl["metadata"].get("ownerReferences") or []
                )
            ]
            try:
                await self._jobset(js, owned[0] if owned else None, queues)
            except Conflict:
                continue

    async def _jobset(self, js: Obj, wl: Obj | None, queues: Sequence[str]) -> None:
        if wl is None:
            body = build_workload(js, "v1beta2")
            ns = body["metadata"]["namespace"]
            wl = await self.kube.create(f"{KUEUE}/namespaces/{ns}/workloads", body, self.JOB_MANAGER)
        status_before = copy.deepcopy(wl.get("status") or {})
        queue = wl["spec"].get("queueName", "")
        want_suspend = workload_step(wl, js, queue if queue in queues or not queues else queues[0])
        if wl["status"] != status_before:
            await self.kube.put(_path(KUEUE, "workloads", wl, "status"), wl, self.STATUS_MANAGER)
        if want_suspend is not None:
            js["spec"]["suspend"] = want_suspend
            await self.kube.put(_path(JOBSETS, "jobsets", js), js, self.JOB_MANAGER)


class ArgoAbort(Reconciler):
    """Argo Rollouts on status.abort: the stable ReplicaSet scaled to spec.replicas, the canary's to 0
    (the ReplicaSet controller then reports the pods ready at once), and the aborted status."""

    name = "argo"
    MANAGER = "rollouts-controller"

    async def reconcile(self) -> None:
        for ro in await self.kube.list(f"{ROLLOUTS}/rollouts"):
            if (ro.get("status") or {}).get("abort") is True:
                try:
                    await self._abort(ro)
                except Conflict:
                    continue

    async def _replica_sets(self, ro: Obj) -> dict[str, Obj]:
        meta = ro["metadata"]
        selector = ((ro.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        out = {}
        for rs in await self.kube.list(f"/apis/apps/v1/namespaces/{meta['namespace']}/replicasets"):
            labels = rs["metadata"].get("labels") or {}
            refs = rs["metadata"].get("ownerReferences") or []
            owned = any(r.get("kind") == "Rollout" and r.get("name") == meta["name"] for r in refs)
            if POD_TEMPLATE_HASH in labels and (
                owned or (not refs and selector and all(labels.get(k) == v for k, v in selector.items()))
            ):
                out[labels[POD_TEMPLATE_HASH]] = rs
        return out

    async def _scale(self, rs: Obj, replicas: int) -> Obj:
        if rs["spec"].get("replicas") != replicas:
            rs["spec"]["replicas"] = replicas
            rs = await self.kube.put(_path("/apis/apps/v1", "replicasets", rs), rs, self.MANAGER)
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
            rs = await self.kube.put(_path("/apis/apps/v1", "replicasets", rs, "status"), rs, "replicaset-controller")
        return rs

    async def _abort(self, ro: Obj) -> None:
        spec, status = ro.get("spec") or {}, ro.get("status") or {}
        stable, current = status.get("stableRS"), status.get("currentPodHash")
        sets = await self._replica_sets(ro)
        if stable in sets:
            sets[stable] = await self._scale(sets[stable], spec.get("replicas", 1))
        if (spec.get("strategy") or {}).get("canary") is not None and current in sets and current != stable:
            sets[current] = await self._scale(sets[current], 0)
        new = abort_status(ro, sets)
        if new != ro.get("status"):
            ro["status"] = new
            await self.kube.put(_path(ROLLOUTS, "rollouts", ro, "status"), ro, self.MANAGER)


def _parse_bool(value: str) -> bool:
    """Go's strconv.ParseBool, as KEDA reads autoscaling.keda.sh/paused (an unparsable value: not paused)."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


class KedaPause(Reconciler):
    """KEDA's pause annotations on ScaledObjects: `paused-replicas: N` scales the target to N through
    its /scale and records status.pausedReplicaCount; `paused: "true"` freezes at the current count;
    either sets Paused=True. Removing them sets Paused=False and drops pausedReplicaCount. (KEDA's
    HPA and scale loop are not modelled: nothing else scales here.)"""

    name = "keda"
    MANAGER = "keda"

    def __init__(self, kube: RealKube) -> None:
        super().__init__(kube)
        self._plurals: dict[tuple[str, str], str] = {}

    async def _plural(self, api_version: str, kind: str) -> str | None:
        """The resource for a kind from discovery, as KEDA's REST mapper finds it."""
        if (api_version, kind) not in self._plurals:
            base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            doc = await self.kube.get(base) or {}
            for r in doc.get("resources") or []:
                if r.get("kind") == kind and "/" not in r["name"]:
                    self._plurals[(api_version, kind)] = r["name"]
        return self._plurals.get((api_version, kind))

    async def reconcile(self) -> None:
        for so in await self.kube.list(f"{KEDA}/scaledobjects"):
            try:
                await self._scaled_object(so)
            except Conflict:
                continue

    async def _scaled_object(self, so: Obj) -> None:
        ann = so["metadata"].get("annotations") or {}
        status = copy.deepcopy(so.get("status") or {})
        conds = status.setdefault("conditions", [])
        gen = None  # KEDA's conditions carry no observedGeneration
        paused = PAUSED_REPLICAS in ann or _parse_bool(ann.get(PAUSED, ""))
        if paused:
            if PAUSED_REPLICAS in ann:
                try:
                    count = int(ann[PAUSED_REPLICAS])
                except ValueError:
                    count = None  # KEDA logs the parse error and does not scale
                ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
                plural = await self._plural(ref.get("apiVersion") or "apps/v1", ref.get("kind") or "Deployment")
                if count is not None and plural and ref.get("name"):
                    api = ref.get("apiVersion") or "apps/v1"
                    base = f"/apis/{api}" if "/" in api else f"/api/{api}"
                    path = f"{base}/namespaces/{so['metadata']['namespace']}/{plural}/{ref['name']}/scale"
                    scale = await self.kube.get(path)
                    if scale is not None and (scale.get("spec") or {}).get("replicas") != count:
                        scale["spec"]["replicas"] = count
                        await self.kube.put(path, scale, self.MANAGER)
                    status["pausedReplicaCount"] = count
            set_condition(conds, "Paused", "True", "ScaledObjectPaused", "ScaledObject is paused", gen)
        else:
            if is_true(so, "Paused"):
                set_condition(
                    conds, "Paused", "False", "ScaledObjectUnpaused", "pause annotation removed for ScaledObject", gen
                )
            status.pop("pausedReplicaCount", None)
        if not conds:
            status.pop("conditions")
        if status != (so.get("status") or {}):
            so["status"] = status
            await self.kube.put(_path(KEDA, "scaledobjects", so, "status"), so, self.MANAGER)


async def run_controllers(kube: RealKube, reconcilers: Sequence[Reconciler], interval: float = 0.1) -> None:
    """Run every reconciler's pass, then sleep ``interval``, until cancelled. A pass that fails with
    anything but a conflict ends the task with that error (the caller checks the task)."""
    while True:
        for r in reconcilers:
            await r.pass_()
            r.passes += 1
        await asyncio.sleep(interval)
