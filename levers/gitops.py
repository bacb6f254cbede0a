"""Objects a GitOps controller manages: named in the plan, and read back again after its resync.

Argo CD tracks what it manages by the annotation `argocd.argoproj.io/tracking-id`
(`<app>:<group>/<kind>:<namespace>/<name>`, the default since v3) or the label
`app.kubernetes.io/instance` (label tracking, the default before v3; Helm charts set that label too,
so it is named as "may be"). Flux's kustomize-controller labels what it applies
`kustomize.toolkit.fluxcd.io/name` + `/namespace`, its helm-controller `helm.toolkit.fluxcd.io/name`
+ `/namespace`. A sync or drift correction puts the field Git holds back over a lever's change, so a
lever on such an object is verified only when the change still holds after the controller's resync
window (policy `gitops_resync_seconds`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from levers.base import Ctx, Lever, Verified
from levers.plan import INCIDENT_ANNOTATION, REQUEST_ANNOTATION, Plan, is_absent, ptr, read

TRACKING_ID = "argocd.argoproj.io/tracking-id"
INSTANCE = "app.kubernetes.io/instance"
FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"
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


def plan_note(obj: dict[str, Any], seconds: float) -> str | None:
    who = managed_by(obj)
    if who is None:
        return None
    return (
        f"managed by {who}: it may revert this. Firebreak reads it back again {seconds:g}s after applying "
        "(policy gitops_resync_seconds); to keep the change, pause that controller's sync of it first."
    )


def window(ctx: Ctx) -> float:
    """The resync wait, kept below stuck_after_seconds so the in-flight timer never fires mid-verify."""
    pol = ctx.policy
    return max(min(pol.gitops_resync_seconds, pol.stuck_after_seconds - 2 * pol.api_timeout_seconds), 0)


def _show(v: Any) -> str:
    return "absent" if is_absent(v) else repr(v)


async def recheck(lever: Lever, ctx: Ctx, plan: Plan, verdict: Verified, after: dict[str, Any]) -> Verified:
    """A verified change on a GitOps-managed object, read again after the resync window: a revert is
    reported as NOT verified, naming the controller; one that holds says it was re-read."""
    who = managed_by(after)
    if not verdict.ok or who is None:
        return verdict
    wait = window(ctx)
    await asyncio.sleep(wait)
    again = await ctx.kube.get(lever.object_path(ctx, plan))
    own = {p: v for p, v in plan.changes.items() if p not in _PROVENANCE and not p.startswith("/status/")}
    reverted = {p: read(again, p) for p, v in own.items() if read(again, p) != v}
    if reverted:
        got = ", ".join(f"{p} is {_show(v)} again" for p, v in reverted.items())
        return Verified(
            False,
            f"applied, then reverted within {wait:g}s, most likely by {who}: {got}. Pause its sync of this object "
            "(Argo CD: turn off automated sync/self-heal for the app; Flux: `flux suspend`) and pull the lever again",
        )
    return Verified(True, f"{verdict.text}; still in place {wait:g}s later (managed by {who})")
