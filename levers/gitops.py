"""Objects a GitOps controller manages: named in the plan, and read back again after its resync.

Argo CD tracks what it manages by the annotation `argocd.argoproj.io/tracking-id`
(`<app>:<group>/<kind>:<namespace>/<name>`, the default since v3) or the label
`app.kubernetes.io/instance` (label tracking, the default before v3; Helm charts set that label too,
so it is named as "may be"). Flux's kustomize-controller labels what it applies
`kustomize.toolkit.fluxcd.io/name` + `/namespace` (ssa.Owner{Group: kustomize.toolkit.fluxcd.io} and
SetOwnerLabels), its helm-controller `helm.toolkit.fluxcd.io/name` + `/namespace` (postrender
OriginLabels). A sync or drift correction puts the field Git holds back over a lever's change, so a
lever on such an object is verified only when the change still holds after the controller's resync.

Argo CD's self-heal reverts within seconds: the wait is policy `gitops_resync_seconds`. Flux reapplies
on every reconcile, each `spec.interval` of the Kustomization (kustomize.toolkit.fluxcd.io/v1) or the
HelmRelease (helm.toolkit.fluxcd.io/v2), so the plan names that interval and, when it is longer than
the pull waits, the change is read again when it has passed (levers/recheck.py). A suspended Flux
object reverts nothing; a HelmRelease reverts in-cluster changes only with
spec.driftDetection.mode `enabled` (else only at its next upgrade).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from bot.clock import hhmm
from bot.clusters import KubeError
from levers import recheck as later
from levers.base import Access, Ctx, Lever, Verified
from levers.plan import INCIDENT_ANNOTATION, REQUEST_ANNOTATION, Plan, is_absent, ptr, read

TRACKING_ID = "argocd.argoproj.io/tracking-id"
INSTANCE = "app.kubernetes.io/instance"
FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"
# (group, version, plural, kind) of the Flux objects whose interval a managed object follows
# (kustomize-controller api/v1, helm-controller api/v2).
FLUX = {
    FLUX_KUSTOMIZE: ("v1", "kustomizations", "Kustomization"),
    FLUX_HELM: ("v2", "helmreleases", "HelmRelease"),
}
# The Flux objects are read wherever they live (flux-system, usually): granted cluster-wide (tools/deploygen).
READS = tuple(Access(group, plural, ("get",)) for group, (_, plural, _) in FLUX.items())
JITTER = 1.1  # Flux may jitter each requeue (--interval-jitter-percentage): read again a little after
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
_PROVENANCE = {ptr("metadata", "annotations", k) for k in (REQUEST_ANNOTATION, INCIDENT_ANNOTATION)}


def managed_by(obj: dict[str, Any]) -> str | None:
    """Which GitOps controller manages `obj`, in words ("Argo CD app chat"), or None."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    ns = meta.get("namespace")
    if tracking := annotations.get(TRACKING_ID):
        return f"Argo CD app {tracking.split(':', 1)[0]}"
    for group, kind in ((FLUX_KUSTOMIZE, "Kustomization"), (FLUX_HELM, "HelmRelease")):
        if name := labels.get(f"{group}/name"):
            owner_ns = labels.get(f"{group}/namespace") or ns
            return f"Flux {kind} {owner_ns}/{name}" if owner_ns else f"Flux {kind} {name}"
    if instance := labels.get(INSTANCE):
        return f"Argo CD app {instance} (by its {INSTANCE} label; Helm sets that label too)"
    return None


def seconds_of(duration: str) -> float | None:
    """A Go duration as Flux's CRDs allow it (`^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$`), in seconds."""
    parts = _DURATION.findall(duration or "")
    if not parts or "".join(n + u for n, u in parts) != duration:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


@dataclass(frozen=True)
class Resync:
    """When the managing controller puts Git's value back, as far as Firebreak can read it."""

    every: float | None  # Flux's spec.interval in seconds (None: no interval read; the policy's wait)
    why: str  # where that comes from, in words
    suspend: str  # how to keep the change
    reverts: bool = True  # False: it corrects no drift now (suspended, HelmRelease without drift detection)


def _flux_owner(obj: dict[str, Any]) -> tuple[str, str, str] | None:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if (meta.get("annotations") or {}).get(TRACKING_ID):
        return None  # Argo CD's own tracking wins, as managed_by says
    for group in FLUX:
        if name := labels.get(f"{group}/name"):
            return group, labels.get(f"{group}/namespace") or meta.get("namespace") or "default", name
    return None


async def resync(ctx: Ctx, obj: dict[str, Any]) -> Resync:
    """The Flux object's interval when Flux manages ``obj``, else the policy's wait."""
    owner = _flux_owner(obj)
    if owner is None:
        return Resync(None, "policy gitops_resync_seconds", "Argo CD: turn off automated sync/self-heal for the app")
    group, ns, name = owner
    version, plural, kind = FLUX[group]
    suspend = f"`flux suspend {kind.lower()} {name} -n {ns}`"
    try:
        flux = await ctx.kube.get(f"/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}")
    except KubeError as e:
        return Resync(None, f"policy gitops_resync_seconds; {kind} {ns}/{name} could not be read ({e})", suspend)
    spec = flux.get("spec") or {}
    if spec.get("suspend") is True:
        return Resync(None, f"{kind} {ns}/{name} is suspended (spec.suspend): it reverts nothing now", suspend, False)
    if kind == "HelmRelease" and ((spec.get("driftDetection") or {}).get("mode") or "disabled") != "enabled":
        why = (
            f"HelmRelease {ns}/{name} has no drift correction (spec.driftDetection.mode is not `enabled`): "
            "it puts its values back at its next upgrade, not at each interval"
        )
        return Resync(None, why, suspend, False)
    every = seconds_of(str(spec.get("interval") or ""))
    if every is None:
        return Resync(None, f"policy gitops_resync_seconds; {kind} {ns}/{name} has no spec.interval", suspend)
    return Resync(every, f"its spec.interval, {spec['interval']}", suspend)


def window(ctx: Ctx, r: Resync | None = None) -> float:
    """How long the pull waits before reading the object again: the policy's wait, or Flux's interval when
    shorter; kept below stuck_after_seconds so the in-flight timer never fires mid-verify."""
    pol = ctx.policy
    wait = pol.gitops_resync_seconds if r is None or r.every is None else min(pol.gitops_resync_seconds, r.every)
    return max(min(wait, pol.stuck_after_seconds - 2 * pol.api_timeout_seconds), 0)


async def plan_note(ctx: Ctx, obj: dict[str, Any]) -> str | None:
    who = managed_by(obj)
    if who is None:
        return None
    r = await resync(ctx, obj)
    wait = window(ctx, r)
    if not r.reverts:
        return f"managed by {who}, which may still revert this later: {r.why}."
    if r.every is not None:
        again = f"; and again when that interval has passed, {r.every * JITTER:g}s after" if r.every > wait else ""
        return (
            f"managed by {who}: it may revert this, at its next reconcile, every {r.every:g}s ({r.why}). Firebreak "
            f"reads it back again {wait:g}s after applying{again}; to keep the change, {r.suspend} first."
        )
    return (
        f"managed by {who}: it may revert this. Firebreak reads it back again {wait:g}s after applying "
        f"({r.why}); to keep the change, pause that controller's sync of it first."
    )


def _show(v: Any) -> str:
    return "absent" if is_absent(v) else repr(v)


async def recheck(lever: Lever, ctx: Ctx, plan: Plan, verdict: Verified, after: dict[str, Any]) -> Verified:
    """A verified change on a GitOps-managed object, read again after the resync window: a revert is
    reported as NOT verified, naming the controller; one that holds says it was re-read."""
    who = managed_by(after)
    if not verdict.ok or who is None:
        return verdict
    applied = ctx.svc.clock.now()
    r = await resync(ctx, after)
    wait = window(ctx, r)
    await asyncio.sleep(wait)
    again = await ctx.kube.get(lever.object_path(ctx, plan))
    if (got := _reverts(plan, again)) is not None:
        return Verified(
            False,
            f"applied, then reverted within {wait:g}s, most likely by {who}: {got}. Pause its sync of this object "
            f"({r.suspend}) and pull the lever again",
        )
    text = f"{verdict.text}; still in place {wait:g}s later (managed by {who})"
    if r.reverts and r.every is not None and r.every > wait:
        due = applied + r.every * JITTER
        await later.at(ctx, due, "gitops", f"{who}'s interval ({r.why})")
        text += f"; Flux reconciles every {r.every:g}s: Firebreak reads it again at {hhmm(due)} UTC"
    return Verified(True, text)


def _reverts(plan: Plan, obj: dict[str, Any]) -> str | None:
    """What of the plan's own change is back to another value in ``obj``, in words, or None."""
    own = {p: v for p, v in plan.changes.items() if p not in _PROVENANCE and not p.startswith("/status/")}
    reverted = {p: read(obj, p) for p, v in own.items() if read(obj, p) != v}
    return ", ".join(f"{p} is {_show(v)} again" for p, v in reverted.items()) if reverted else None


async def reverted(ctx: Ctx, plan: Plan, obj: dict[str, Any]) -> Verified:
    """The read when the interval has passed (levers/recheck.py)."""
    who = managed_by(obj) or "its GitOps controller"
    if (got := _reverts(plan, obj)) is not None:
        suspend = (await resync(ctx, obj)).suspend
        return Verified(False, f"reverted, most likely by {who}: {got}. Pause its sync ({suspend}) and pull again")
    return Verified(True, f"still in place (managed by {who})")
