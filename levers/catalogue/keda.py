"""keda-pause: freeze a ScaledObject at its target's current replica count.

The registry-outage move: scale-in can't destroy warm capacity while the
pause annotation holds. The count comes from the scale target's /scale; the
target's resource (plural) is looked up in the cluster's discovery, as KEDA
does through its REST mapper, never derived from the kind's spelling.
"""

from __future__ import annotations

from typing import Any

from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal
from levers.catalogue.simple import merge_plan
from levers.kube import KubeError
from levers.plan import Plan, ptr

PAUSED = "autoscaling.keda.sh/paused-replicas"
# KEDA's defaults for an empty scaleTargetRef.apiVersion / kind.
DEFAULT_API_VERSION = "apps/v1"
DEFAULT_KIND = "Deployment"
# The scale targets whose /scale Firebreak may read (deploy/rbac): KEDA's default, StatefulSets and Argo
# Rollouts. A ScaledObject scaling another kind gets the API server's 403 naming `<plural>/scale`:
# grant it in deploy/rbac and add it here.
SCALE_TARGETS = (
    Access("apps", "deployments/scale", ("get",)),
    Access("apps", "statefulsets/scale", ("get",)),
    Access("argoproj.io", "rollouts/scale", ("get",)),
)


async def scale_path(ctx: Ctx, namespace: str, ref: dict[str, Any]) -> str:
    api_version = ref.get("apiVersion") or DEFAULT_API_VERSION
    kind = ref.get("kind") or DEFAULT_KIND
    plural = await ctx.kube.plural_for(api_version, kind)
    if plural is None:
        raise LeverRefusal(
            f"ScaledObject {ctx.target} scales a {kind} ({api_version}), a kind this cluster does not serve: "
            "check spec.scaleTargetRef, and that the kind's CRD is installed."
        )
    group, _, version = api_version.rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{plural}/{ref['name']}/scale"


class KedaPause(Lever):
    name = "keda-pause"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects", namespaced=True)
    needs = (Access.on(kind, "get", "patch"), *SCALE_TARGETS)  # the target's plural comes from discovery
    summary = "freeze a ScaledObject at its target's current replicas (stop scale-in)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        if not ref.get("name"):
            raise LeverRefusal(f"ScaledObject {ctx.target} has no spec.scaleTargetRef.name; nothing to freeze.")
        kind = ref.get("kind") or DEFAULT_KIND
        path = await scale_path(ctx, ctx.target.namespace or "default", ref)
        try:
            scale = await ctx.kube.get(path)
        except KubeError as e:
            if e.code != 404:
                raise
            raise LeverRefusal(
                f"the scale target {kind} {ctx.target.namespace}/{ref['name']} was not found, or has no /scale "
                f"({e.message})."
            ) from None
        replicas = int((scale.get("spec") or {}).get("replicas") or 0)
        return merge_plan(
            self,
            ctx,
            obj,
            {ptr("metadata", "annotations", PAUSED): str(replicas)},
            f"paused at {replicas} replicas ({kind} {ref['name']})",
        )
