"""The price of stopping a training gang: its GPUs and the GPU-hours since it last made progress safe.

A gang (a JobSet, a Kubeflow PyTorchJob, a RayJob, a LeaderWorkerSet, a plain Job Kueue admits; and
its Kueue Workload when Kueue admits it) loses everything since its last checkpoint when it stops or
a node of it goes, and nothing from before its last start or restart (it resumed from a checkpoint
then). Its GPUs are read from the cluster: the Workload's podSets, else the JobSet's replicatedJobs
(replicas x parallelism x nvidia.com/gpu per pod), a Job's parallelism, or the gang's own pods. GPUs
that come another way (DRA ResourceClaims, MIG slices, other vendors' resources) are not counted:
the figure is unknown and says why, never 0.

Its last checkpoint comes from the policy's source (bot.policy.levers.PricePolicy): a Prometheus
expression per job, else an RFC 3339 annotation on the gang's object. Its last (re)start from what
the controllers record: a JobSet's current Jobs (label jobset.sigs.k8s.io/restart-attempt equal to
its status.restarts, jobset v0.12.0 pkg/constants RestartsKey) and their status.startTime, which
batch/v1 sets when the Job controller starts the Job and resets on every resume; a Job's own
status.startTime; any other gang's pods' status.startTime (the kubelet's). The GPU-hours run from
the later of the two. When no checkpoint answers, the progress is unknown and says why: never a
guess, never 0.

A pod's gang is found through its owner chain (ownerReferences with controller: true: pod -> Job ->
JobSet, pod -> RayCluster -> RayJob, worker pod -> StatefulSet -> leader pod -> StatefulSet ->
LeaderWorkerSet), each owner read by the kind the cluster serves for its apiVersion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot import logs
from bot.clusters import KubeError
from bot.prom import Failed, Scalar, Vector
from levers.base import Ctx
from levers.price import GPU_HOURS, Cost, show

log = logs.get(__name__)

GPU = "nvidia.com/gpu"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every pod of a JobSet (the JobSet controller's)
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"  # on each child Job: the JobSet restart it belongs to
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # on each Workload Kueue makes for a job: the job's uid
WORKLOADS = ("kueue.x-k8s.io", ("v1beta2", "v1beta1"), "workloads")
MIG = "nvidia.com/mig-"  # the MIG device plugin's mixed strategy: nvidia.com/mig-<profile> per slice
# Accelerators other device plugins advertise: a GPU-hour of one is not an nvidia.com/gpu's.
OTHER_ACCELERATORS = ("amd.com/gpu", "gpu.intel.com/", "habana.ai/", "google.com/tpu", "aws.amazon.com/neuron")

# Whatever sits at the top of these owner chains is a training gang. Anything Kueue admits is one too
# (a plain Job with a queue, or a root a Workload names as its owner).
GANG_KINDS = frozenset(
    {
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "MPIJob"),
        ("kubeflow.org", "JAXJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "PaddleJob"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayCluster"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    }
)
_MAX_DEPTH = 8  # LeaderWorkerSet's worker pods are five owners deep; more is a loop


class Unreadable(Exception):
    """A figure that can't be read from what the cluster holds; the message says what and why."""


def _quantity(key: str, v: Any, where: str) -> int:
    """An extended resource's quantity: a whole number (extended resources take no fractions)."""
    try:
        n = float(str(v))
    except ValueError:
        raise Unreadable(f"{where} has {key}={v!r}, not a number") from None
    if not n.is_integer() or n < 0:
        raise Unreadable(f"{where} has {key}={v!r}, not a whole number of GPUs")
    return int(n)


def _not_counted(pod_spec: dict[str, Any], where: str) -> str | None:
    """Why this pod's GPUs can't be counted as nvidia.com/gpu (None: they can)."""
    claims = [str(c.get("name")) for c in pod_spec.get("resourceClaims") or [] if isinstance(c, dict)]
    if claims:
        return (
            f"{where} gets devices through DRA ResourceClaims (spec.resourceClaims: {', '.join(claims)}), "
            "whose GPUs are not counted"
        )
    for c in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        res = c.get("resources") or {}
        for key, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            if key.startswith(MIG):
                return f"{where} asks for MIG slices ({key}: {v}), which are not whole GPUs and are not counted"
            if key.startswith(OTHER_ACCELERATORS):
                return f"{where} asks for {key}: {v}, which is not counted as {GPU}"
    return None


def pod_gpus(pod_spec: dict[str, Any], where: str) -> int:
    """GPUs one pod asks for: each container's request (else its limit, which the request defaults to).
    Unreadable when its accelerators come another way (DRA, MIG, another vendor): never a silent 0."""
    why = _not_counted(pod_spec, where)
    if why is not None:
        raise Unreadable(why)
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        v = (res.get("requests") or {}).get(GPU, (res.get("limits") or {}).get(GPU))
        if v is not None:
            total += _quantity(GPU, v, where)
    return total


def jobset_gpus(js: dict[str, Any]) -> int:
    total = 0
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        job = ((rj.get("template") or {}).get("spec")) or {}
        pod = ((job.get("template") or {}).get("spec")) or {}
        total += int(rj.get("replicas", 1)) * int(job.get("parallelism", 1)) * pod_gpus(pod, f"{rj.get('name')}")
    return total


def job_gpus(job: dict[str, Any]) -> int:
    spec = job.get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec")) or {}
    return int(spec.get("parallelism", 1)) * pod_gpus(pod, f"Job {(job.get('metadata') or {}).get('name')}")


def workload_gpus(wl: dict[str, Any]) -> int:
    total = 0
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        pod = ((ps.get("template") or {}).get("spec")) or {}
        total += int(ps.get("count", 1)) * pod_gpus(pod, f"podSet {ps.get('name')}")
    return total


def _live(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Running", "Pending") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def _rfc3339(text: str) -> float:
    # datetime.fromisoformat reads RFC 3339 (Z included) from Python 3.11; a time with no offset is not one.
    t = datetime.fromisoformat(text)
    if t.tzinfo is None:
        raise ValueError("no UTC offset")
    return t.timestamp()


def _named(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind') or 'JobSet'} {meta.get('namespace', 'default')}/{meta.get('name')}"


async def _from_query(ctx: Ctx, ns: str, name: str) -> tuple[float | None, str]:
    """(checkpoint time, how) from the policy's query; (None, why) when it does not answer."""
    pol = ctx.policy.price
    promql = pol.render_checkpoint(ns, name)
    if promql is None:
        return None, ""
    if ctx.svc.prometheus is None:
        return None, "the checkpoint query needs Prometheus and PROMETHEUS_URL is not set"
    got = await ctx.svc.prometheus.query(promql, ctx.svc.clock.now(), pol.timeout_seconds)
    if isinstance(got, Failed):
        log.warning("checkpoint_query_failed", gang=f"{ns}/{name}", error=str(got))
        return None, f"the checkpoint query failed: {got}"
    if isinstance(got, Scalar):
        values = [got.value]
    elif isinstance(got, Vector):
        values = got.values
    else:
        return None, "the checkpoint query answers no instant vector or scalar"
    if not values:
        return None, "the checkpoint query has no series for this job"
    if len(values) > 1:
        return None, f"the checkpoint query returns {len(values)} series for this one job (it must return one)"
    if math.isnan(values[0]) or values[0] <= 0:
        return None, f"the checkpoint query answers {values[0]:g}, not a checkpoint's Unix time"
    return values[0], "the checkpoint query"


def _from_annotation(ctx: Ctx, js: dict[str, Any]) -> tuple[float | None, str]:
    key = ctx.policy.price.checkpoint_annotation
    if key is None:
        return None, ""
    raw = ((js.get("metadata") or {}).get("annotations") or {}).get(key)
    if raw is None:
        return None, f"no {key} annotation"
    try:
        return _rfc3339(str(raw)), f"annotation {key}"
    except ValueError:
        shown = str(raw) if len(str(raw)) <= 40 else str(raw)[:39] + "…"
        return None, f"annotation {key}={shown!r} is not an RFC 3339 time"


async def last_checkpoint(ctx: Ctx, js: dict[str, Any]) -> tuple[float | None, str]:
    """The gang's last checkpoint time and where it came from, or None and why none answered."""
    meta = js.get("metadata") or {}
    ns, name = meta.get("namespace", "default"), meta.get("name", "")
    whys = []
    for at, how in (await _from_query(ctx, ns, name), _from_annotation(ctx, js)):
        if at is not None:
            return at, how
        if how:
            whys.append(how)
    return None, "; ".join(whys) or "the policy names no checkpoint source (price.checkpoint_query/annotation)"


def _latest(objs: list[dict[str, Any]]) -> float | None:
    """The newest status.startTime among `objs` (None: none has one that reads as a time)."""
    times = []
    for o in objs:
        raw = (o.get("status") or {}).get("startTime")
        if isinstance(raw, str):
            try:
                times.append(_rfc3339(raw))
            except ValueError:
                continue
    return max(times) if times else None


async def _jobset_start(ctx: Ctx, js: dict[str, Any]) -> tuple[float | None, str]:
    meta = js.get("metadata") or {}
    ns, name, uid = meta.get("namespace", "default"), meta.get("name", ""), meta.get("uid")
    restarts = (js.get("status") or {}).get("restarts") or 0
    if await ctx.kube.served_version("batch", ("v1",), "jobs") is None:
        return None, "this cluster serves no batch/v1 Jobs"
    jobs = await ctx.kube.list_all(f"/apis/batch/v1/namespaces/{ns}/jobs", {"labelSelector": f"{JOBSET_LABEL}={name}"})
    # The Jobs of the current restart only: the JobSet controller deletes older attempts' (foreground).
    current = [
        j
        for j in jobs
        if _owned_by(j, uid)
        and not j["metadata"].get("deletionTimestamp")
        and (j["metadata"].get("labels") or {}).get(RESTART_LABEL) == str(restarts)
    ]
    attempt = f"restart {restarts}, status.restarts" if restarts else "no restart"
    if not current:
        return None, f"it has no Jobs of its current attempt ({attempt})"
    at = _latest(current)
    if at is None:
        return None, f"none of its {len(current)} Jobs has a status.startTime ({attempt})"
    return at, f"its Jobs' status.startTime ({attempt})"


async def last_start(
    ctx: Ctx, obj: dict[str, Any], pods: list[dict[str, Any]] | None = None
) -> tuple[float | None, str]:
    """When the gang last started or restarted, and from what; (None, why) when that can't be read."""
    kind = obj.get("kind") or "JobSet"
    try:
        if kind == "JobSet":
            return await _jobset_start(ctx, obj)
    except KubeError as e:
        return None, f"its Jobs could not be listed ({e})"
    if kind == "Job":
        at = _latest([obj])
        return (at, "the Job's status.startTime") if at is not None else (None, "the Job has no status.startTime")
    live = [p for p in pods or [] if _live(p)]
    at = _latest(live)
    if at is None:
        return None, "none of its pods has a status.startTime" if live else "none of its pods is running"
    return at, f"its {len(live)} pods' status.startTime"


def _gpus(obj: dict[str, Any], wl: dict[str, Any] | None, pods: list[dict[str, Any]] | None) -> tuple[int, str]:
    """(GPUs, how they were read) of a gang; Unreadable when they can't be."""
    kind = obj.get("kind") or "JobSet"
    if wl is not None:
        return workload_gpus(wl), f"Workload {wl['metadata']['name']} podSets"
    if kind == "JobSet":
        return jobset_gpus(obj), "replicas x parallelism x GPUs/pod"
    if kind == "Job":
        return job_gpus(obj), "parallelism x GPUs/pod"
    live = [p for p in pods or [] if _live(p)]
    if not live:
        raise Unreadable(f"no Kueue Workload and no running pod of the {kind} to count its GPUs from")
    total = sum(pod_gpus(p.get("spec") or {}, f"pod {p['metadata'].get('name')}") for p in live)
    return total, f"its {len(live)} running pods' {GPU}"


async def gang_costs(
    ctx: Ctx,
    js: dict[str, Any],
    wl: dict[str, Any] | None,
    hit: str = "",
    pods: list[dict[str, Any]] | None = None,
) -> list[Cost]:
    """The GPUs of one gang (a JobSet, or any gang object found through gangs_of) and the GPU-hours since
    the later of its last checkpoint and its last (re)start (unknown, with why, when unread). `pods`: the
    gang's pods, for a gang that is not a JobSet or a Job."""
    what = _named(js) + (f" {hit}" if hit else "")
    try:
        gpus, source = _gpus(js, wl, pods)
    except (Unreadable, ValueError, TypeError) as e:
        why = str(e) if isinstance(e, Unreadable) else "its replicas or parallelism are not numbers"
        return [Cost(what=what, unit=GPU_HOURS, value=None, how=why), Cost(what=what, unit="GPUs", value=None, how=why)]
    at, how = await last_checkpoint(ctx, js)
    start, started = await last_start(ctx, js, pods)
    now = ctx.svc.clock.now()
    if start is not None and start > now:
        start, started = None, f"its start ({started}) is after now: the clocks disagree"
    verb = "restarted" if (js.get("status") or {}).get("restarts") else "started"
    if at is None:
        bound = ""
        if start is not None:
            most = show(round(gpus * (now - start) / 3600, 1))
            bound = f"; at most {most} GPU-hours: it {verb} {(now - start) / 60:.0f} min ago ({started})"
        lost = Cost(what=what, unit=GPU_HOURS, value=None, how=f"last checkpoint unknown: {how}{bound}")
    elif at > now:
        lost = Cost(what=what, unit=GPU_HOURS, value=None, how=f"the last checkpoint ({how}) is in the future")
    elif start is not None and start > at:
        minutes = (now - start) / 60
        lost = Cost(
            what=what,
            unit=GPU_HOURS,
            value=gpus * minutes / 60,
            how=f"{gpus} GPUs x {minutes:.0f} min since it {verb} ({started}), after its last checkpoint ({how})",
        )
    else:
        minutes = (now - at) / 60
        unread = "" if start is not None else f"; last start unread: {started}"
        lost = Cost(
            what=what,
            unit=GPU_HOURS,
            value=gpus * minutes / 60,
            how=f"{gpus} GPUs x {minutes:.0f} min since the last checkpoint ({how}){unread}",
        )
    return [lost, Cost(what=what, unit="GPUs", value=gpus, how=source)]


def figure_gpus(gpus: int | None) -> str:
    return "unknown GPUs" if gpus is None else f"{gpus} GPU" + ("" if gpus == 1 else "s")


# ----------------------------------------------------------------------------- gangs through owners


def _owned_by(obj: dict[str, Any], uid: str | None) -> bool:
    return uid is not None and any(
        r.get("uid") == uid for r in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def _controller(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), None)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


@dataclass
class Gang:
    """A training gang some pods belong to: its object, or (obj None) the owner that could not be read."""

    kind: str
    namespace: str
    name: str
    obj: dict[str, Any] | None
    why: str = ""  # obj None: why it could not be read
    pods: list[dict[str, Any]] = field(default_factory=list)  # the pods given that belong to it

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class _Owners:
    """Owner reads for one namespace, each object read once."""

    def __init__(self, ctx: Ctx, ns: str) -> None:
        self.ctx, self.ns = ctx, ns
        self.seen: dict[str, dict[str, Any]] = {}

    async def get(self, ref: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        uid, api, kind, name = ref.get("uid"), str(ref.get("apiVersion")), str(ref.get("kind")), str(ref.get("name"))
        if uid in self.seen:
            return self.seen[str(uid)], ""
        plural = await self.ctx.kube.plural_for(api, kind)
        if plural is None:
            return None, f"its owner {kind} {self.ns}/{name} is {api}, which this cluster does not serve"
        base = f"/apis/{api}" if "/" in api else f"/api/{api}"
        try:
            got = await self.ctx.kube.get(f"{base}/namespaces/{self.ns}/{plural}/{name}")
        except KubeError as e:
            gone = " (gone: the garbage collector is removing what it owned)" if e.code == 404 else ""
            return None, f"its owner {kind} {self.ns}/{name} could not be read: {e}{gone}"
        if (got.get("metadata") or {}).get("uid") != uid:
            return None, f"its owner {kind} {self.ns}/{name} is gone (another object has its name now)"
        got.setdefault("kind", kind)
        self.seen[str(uid)] = got
        return got, ""

    async def root(self, pod: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
        """(the top of `pod`'s owner chain, the reference that could not be followed, why)."""
        cur = pod
        for _ in range(_MAX_DEPTH):
            ref = _controller(cur)
            if ref is None:
                return cur, None, ""
            got, why = await self.get(ref)
            if got is None:
                return None, ref, why
            cur = got
        return None, _controller(cur), f"its owner chain is longer than {_MAX_DEPTH}"


async def _workload(ctx: Ctx, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The one live Kueue Workload owned by `obj` (by the job-uid label Kueue sets and the owner uid)."""
    group, versions, plural = WORKLOADS
    uid = (obj.get("metadata") or {}).get("uid")
    version = await ctx.kube.served_version(group, versions, plural)
    if version is None or not uid:
        return None
    ns = (obj.get("metadata") or {}).get("namespace", "default")
    listing = await ctx.kube.list_all(
        f"/apis/{group}/{version}/namespaces/{ns}/{plural}", {"labelSelector": f"{JOB_UID_LABEL}={uid}"}
    )
    live = [
        w
        for w in listing
        if _owned_by(w, uid)
        and not w["metadata"].get("deletionTimestamp")
        and not any(
            c.get("type") == "Finished" and c.get("status") == "True"
            for c in (w.get("status") or {}).get("conditions") or []
        )
    ]
    return live[0] if len(live) == 1 else None


async def gangs_of(ctx: Ctx, ns: str, pods: list[dict[str, Any]], owners: _Owners | None = None) -> list[Gang]:
    """The training gangs `pods` (of namespace `ns`) belong to, found through their owner chains: a
    root that is a gang kind (GANG_KINDS), or anything Kueue queues or admits. A chain that can't be
    followed is a gang whose object is unread (obj None, why said), never left out."""
    owners = owners or _Owners(ctx, ns)
    gangs: dict[tuple[str, str], Gang] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if _controller(pod) is None and labels.get(JOBSET_LABEL):
            # A JobSet's pod whose owner is not recorded (made by hand, or copied): its label names the JobSet.
            ref = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": labels[JOBSET_LABEL]}
            root, broken, why = await _by_name(ctx, ns, labels[JOBSET_LABEL])
            if root is None:
                broken = ref
        else:
            root, broken, why = await owners.root(pod)
        if root is None:
            ref = broken or {}
            key = (str(ref.get("kind")), str(ref.get("name")))
            gang = gangs.setdefault(key, Gang(key[0], ns, key[1], None, why))
        else:
            if root is pod or not await _is_gang(ctx, root):
                continue
            kind, name = str(root.get("kind")), str(root["metadata"].get("name"))
            gang = gangs.setdefault((kind, name), Gang(kind, ns, name, root))
        gang.pods.append(pod)
    return list(gangs.values())


async def _by_name(ctx: Ctx, ns: str, name: str) -> tuple[dict[str, Any] | None, None, str]:
    try:
        js = await ctx.kube.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}")
    except KubeError as e:
        return None, None, f"JobSet {ns}/{name} (its pods' {JOBSET_LABEL}) could not be read: {e}"
    js.setdefault("kind", "JobSet")
    return js, None, ""


async def _is_gang(ctx: Ctx, root: dict[str, Any]) -> bool:
    if (_group(str(root.get("apiVersion") or "")), root.get("kind")) in GANG_KINDS:
        return True
    if QUEUE_LABEL in ((root.get("metadata") or {}).get("labels") or {}):
        return True
    try:
        return await _workload(ctx, root) is not None
    except KubeError:
        return False  # a Job with no queue label whose Workloads can't be listed: not known to be Kueue's


async def pods_costs(ctx: Ctx, ns: str, pods: list[dict[str, Any]], hit: str = "") -> tuple[list[Cost], list[str]]:
    """The price of the gangs `pods` belong to (node-quarantine: the pods on the node), with notes on
    what could not be read. A gang that is neither a JobSet nor a Job is priced from all its pods in
    `ns` (its GPUs and start), listed once."""
    notes: list[str] = []
    costs: list[Cost] = []
    everyone: list[dict[str, Any]] | None = None
    owners = _Owners(ctx, ns)
    for gang in await gangs_of(ctx, ns, [p for p in pods if _live(p)], owners):
        what = f"{gang.ref} {hit}".rstrip()
        if gang.obj is None:
            costs += [
                Cost(what=what, unit=GPU_HOURS, value=None, how=gang.why),
                Cost(what=what, unit="GPUs", value=None, how=gang.why),
            ]
            continue
        members = gang.pods
        if gang.kind not in ("JobSet", "Job"):
            if everyone is None:
                try:
                    everyone = await ctx.kube.list_all(f"/api/v1/namespaces/{ns}/pods")
                except KubeError as e:
                    notes.append(f"could not list the pods in {ns} (for {gang.ref}): {e}")
                    everyone = []
            members = await _members(owners, gang, everyone) or gang.pods
        try:
            wl = await _workload(ctx, gang.obj)
        except KubeError as e:
            notes.append(f"could not list the Kueue Workloads of {gang.ref}: {e}")
            wl = None
        costs += await gang_costs(ctx, gang.obj, wl, hit, pods=members)
    return costs, notes


async def _members(owners: _Owners, gang: Gang, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of `pods` whose owner chain ends at `gang`."""
    uid = (gang.obj or {}).get("metadata", {}).get("uid")
    out = []
    for p in pods:
        if not _live(p):
            continue
        root, _, _ = await owners.root(p)
        if root is not None and (root.get("metadata") or {}).get("uid") == uid:
            out.append(p)
    return out
