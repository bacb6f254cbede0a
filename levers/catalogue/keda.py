"""keda-pause: freeze a ScaledObject at its target's current replica count.

The registry-outage move: scale-in can't destroy warm capacity while the
pause annotation holds. The count comes from the scale target's /scale.
"""

from __future__ import annotations

from typing import Any

from levers.base import Ctx, Kind, Lever, LeverRefusal
from levers.catalogue.simple import merge_plan
from levers.plan import Plan, ptr

PAUSED = "autoscaling.keda.sh/paused-replicas"
# Kinds KEDA commonly scales whose plural isn't simply lowercase + "s".
_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "Rollout": "rollouts"}


def scale_path(namespace: str, ref: dict[str, Any]) -> str:
    api_version = ref.get("apiVersion") or "apps/v1"  # KEDA's default target
    kind = ref.get("kind") or "Deployment"
    plural = _PLURALS.get(kind, kind.lower() + "s")
    group, _, version = api_version.rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{plural}/{ref['name']}/scale"


class KedaPause(Lever):
    name = "keda-pause"
    kind = Kind("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects", namespaced=True)
    summary = "freeze a ScaledObject at its target's current replicas (stop scale-in)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        if not ref.get("name"):
            raise LeverRefusal(f"ScaledObject {ctx.target} has no spec.scaleTargetRef.name; nothing to freeze.")
        scale = await ctx.kube.get(scale_path(ctx.target.namespace or "default", ref))
        replicas = int((scale.get("spec") or {}).get("replicas") or 0)
        kind = ref.get("kind") or "Deployment"
        return merge_plan(
            self,
            ctx,
            obj,
            {ptr("metadata", "annotations", PAUSED): str(replicas)},
            f"paused at {replicas} replicas ({kind} {ref['name']})",
        )
