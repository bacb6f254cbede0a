"""The price of stopping a training gang: its GPUs and the GPU-hours since its last checkpoint.

A gang (a JobSet, and its Kueue Workload when Kueue admits it) loses everything since its last
checkpoint when it stops or a node of it goes. Its GPUs are read from the cluster (the Workload's
podSets, else the JobSet's replicatedJobs: replicas x parallelism x nvidia.com/gpu per pod); its
last checkpoint from the policy's source (bot.policy.levers.PricePolicy): a Prometheus expression
per job, else an RFC 3339 annotation on the JobSet. When neither answers, the progress is unknown
and says why: never a guess, never 0.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from bot import logs
from bot.prom import Failed, Scalar, Vector
from levers.base import Ctx
from levers.price import GPU_HOURS, Cost

log = logs.get(__name__)

GPU = "nvidia.com/gpu"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every pod of a JobSet (the JobSet controller's)


class Unreadable(Exception):
    """A figure that can't be read from what the cluster holds; the message says what and why."""


def _quantity(v: Any, where: str) -> int:
    """An nvidia.com/gpu quantity: a whole number (extended resources take no fractions)."""
    try:
        n = float(str(v))
    except ValueError:
        raise Unreadable(f"{where} has {GPU}={v!r}, not a number") from None
    if not n.is_integer() or n < 0:
        raise Unreadable(f"{where} has {GPU}={v!r}, not a whole number of GPUs")
    return int(n)


def pod_gpus(pod_spec: dict[str, Any], where: str) -> int:
    """GPUs one pod asks for: each container's request (else its limit, which the request defaults to)."""
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        v = (res.get("requests") or {}).get(GPU, (res.get("limits") or {}).get(GPU))
        if v is not None:
            total += _quantity(v, where)
    return total


def jobset_gpus(js: dict[str, Any]) -> int:
    total = 0
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        job = ((rj.get("template") or {}).get("spec")) or {}
        pod = ((job.get("template") or {}).get("spec")) or {}
        total += int(rj.get("replicas", 1)) * int(job.get("parallelism", 1)) * pod_gpus(pod, f"{rj.get('name')}")
    return total


def workload_gpus(wl: dict[str, Any]) -> int:
    total = 0
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        pod = ((ps.get("template") or {}).get("spec")) or {}
        total += int(ps.get("count", 1)) * pod_gpus(pod, f"podSet {ps.get('name')}")
    return total


def _rfc3339(text: str) -> float:
    # datetime.fromisoformat reads RFC 3339 (Z included) from Python 3.11; a time with no offset is not one.
    t = datetime.fromisoformat(text)
    if t.tzinfo is None:
        raise ValueError("no UTC offset")
    return t.timestamp()


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
        log.warning("checkpoint_query_failed", jobset=f"{ns}/{name}", error=str(got))
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


async def gang_costs(ctx: Ctx, js: dict[str, Any], wl: dict[str, Any] | None, hit: str = "") -> list[Cost]:
    """The GPUs of one gang and the GPU-hours since its last checkpoint (unknown, with why, when unread)."""
    meta = js.get("metadata") or {}
    what = f"JobSet {meta.get('namespace', 'default')}/{meta.get('name')}" + (f" {hit}" if hit else "")
    try:
        gpus = workload_gpus(wl) if wl is not None else jobset_gpus(js)
    except (Unreadable, ValueError, TypeError) as e:
        why = str(e) if isinstance(e, Unreadable) else "its replicas or parallelism are not numbers"
        return [Cost(what=what, unit=GPU_HOURS, value=None, how=why), Cost(what=what, unit="GPUs", value=None, how=why)]
    source = f"Workload {wl['metadata']['name']} podSets" if wl is not None else "replicas x parallelism x GPUs/pod"
    at, how = await last_checkpoint(ctx, js)
    now = ctx.svc.clock.now()
    if at is None:
        lost = Cost(what=what, unit=GPU_HOURS, value=None, how=f"last checkpoint unknown: {how}")
    elif at > now:
        lost = Cost(what=what, unit=GPU_HOURS, value=None, how=f"the last checkpoint ({how}) is in the future")
    else:
        minutes = (now - at) / 60
        lost = Cost(
            what=what,
            unit=GPU_HOURS,
            value=gpus * minutes / 60,
            how=f"{gpus} GPUs x {minutes:.0f} min since the last checkpoint ({how})",
        )
    return [lost, Cost(what=what, unit="GPUs", value=gpus, how=source)]


def figure_gpus(gpus: int | None) -> str:
    return "unknown GPUs" if gpus is None else f"{gpus} GPU" + ("" if gpus == 1 else "s")
