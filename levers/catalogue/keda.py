"""keda-pause: pause a ScaledObject with KEDA's own annotation, so scale-in can't destroy warm capacity.

By default it sets `autoscaling.keda.sh/paused: "true"`: KEDA v2.20 (controllers/keda/
scaledobject_controller.go handlePause, scaleTargetToPausedCount) stops its scale loop and leaves the
target at whatever replicas it has, so nothing is read and written back (reading the count and then
writing it races the autoscaler). Paused either way, KEDA deletes the HPA it owns, and recreates it
when the annotation goes.

`replicas=<n>` pins the target at n instead (`autoscaling.keda.sh/paused-replicas`: KEDA scales the
target to n through /scale when it reconciles the ScaledObject; it does not watch the target, so a
count someone else writes later stands, as the real operator shows in tests/realkube/test_keda_real.py);
`replicas=current` reads the count from the target's /scale first (which
races the autoscaler). The target's resource (plural) is looked up in the cluster's discovery, as
KEDA does through its REST mapper, never derived from the kind's spelling.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import field_validator

from bot.policy.levers import LeverRule
from bot.prom.promql import fill
from levers import pricing
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, NoParams
from levers.catalogue.simple import merge_plan
from levers.kube import KubeError
from levers.plan import Plan, ptr
from levers.price import Cost, Price, show

PAUSED = "autoscaling.keda.sh/paused"  # v1alpha1.PausedAnnotation: freeze at the current count
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"  # v1alpha1.PausedReplicasAnnotation
# KEDA's defaults for an empty scaleTargetRef.apiVersion / kind.
DEFAULT_API_VERSION = "apps/v1"
DEFAULT_KIND = "Deployment"
# The scale targets whose /scale Firebreak may read (deploy/rbac) for replicas=current: KEDA's default,
# StatefulSets and Argo Rollouts. A ScaledObject scaling another kind gets the API server's 403 naming
# `<plural>/scale`: grant it in deploy/rbac and add it here.
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


class KedaParams(NoParams):
    replicas: int | Literal["current"] | None = None

    @field_validator("replicas", mode="before")
    @classmethod
    def _count(cls, v: Any) -> Any:
        if v is None or v == "current":
            return v
        text = str(v)
        if not text.isdigit() or len(text) > 6:
            raise ValueError("a count of replicas (0-999999), or `current`")
        return int(text)


# KEDA reads `paused` with Go's strconv.ParseBool and takes a value it cannot parse as true
# (apis/keda/v1alpha1/scaledobject_types.go, getBoolAnnotation, v2.21.0): only these are no pause.
_GO_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


def reads_paused(key: str, value: str) -> bool:
    """Whether KEDA reads this pause annotation as a pause (tests/realkube/test_keda_real.py shows
    `paused: "false"` is not one and an unparsable value is); `paused-replicas` always is."""
    return key != PAUSED or value not in _GO_FALSE


class KedaPause(Lever):
    name = "keda-pause"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects", namespaced=True)
    # The target's /scale is read for replicas=current and for the price (the replicas frozen); its
    # plural comes from discovery.
    needs = (Access.on(kind, "get", "patch"), *SCALE_TARGETS)
    summary = "pause a ScaledObject with KEDA's paused annotation: its target keeps its replicas (stop scale-in)"
    Params = KedaParams
    usage = "[replicas=<n>|current]"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        p = ctx.params_as(KedaParams)
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        if not ref.get("name"):
            raise LeverRefusal(f"ScaledObject {ctx.target} has no spec.scaleTargetRef.name; nothing to freeze.")
        kind = ref.get("kind") or DEFAULT_KIND
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        held = [k for k in (PAUSED_REPLICAS, PAUSED) if k in annotations and reads_paused(k, annotations[k])]
        if held:
            # KEDA reads these already (paused-replicas wins): another pause changes nothing or moves the
            # count, and its undo would take away a pause someone else set.
            said = ", ".join(f"{k}={annotations[k]!r}" for k in held)
            raise LeverRefusal(
                f"ScaledObject {ctx.target} already carries {said}, which KEDA reads as paused: nothing to do. "
                f"To hand it back to the autoscaler: kubectl annotate scaledobject {ctx.target.name} "
                f"-n {ctx.target.namespace} {held[0]}-"
            )
        if p.replicas is None:
            return merge_plan(
                self,
                ctx,
                obj,
                {ptr("metadata", "annotations", PAUSED): "true"},
                f"paused at its current replicas ({kind} {ref['name']}, {PAUSED}=true)",
            )
        replicas = await self._current(ctx, ref, kind) if p.replicas == "current" else p.replicas
        return merge_plan(
            self,
            ctx,
            obj,
            {ptr("metadata", "annotations", PAUSED_REPLICAS): str(replicas)},
            f"paused at {replicas} replicas ({kind} {ref['name']})",
        )

    async def _current(self, ctx: Ctx, ref: dict[str, Any], kind: str) -> int:
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
        return int((scale.get("spec") or {}).get("replicas") or 0)

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The replicas frozen (the target's /scale, or the paused-replicas count asked for) and the
        demand trend: the trigger's query (or policy price.keda-pause.demand_query) now and N min ago."""
        p = ctx.params_as(KedaParams)
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        kind = ref.get("kind") or DEFAULT_KIND
        target = f"{kind} {ctx.target.namespace}/{ref.get('name')}"
        replicas, why = await self._replicas(ctx, ref, kind)
        if p.replicas is None:
            frozen = Cost(what=f"{target} frozen at", unit="replicas", value=replicas, how=why or "its /scale now")
        else:
            pinned = float(plan.changes.get(ptr("metadata", "annotations", PAUSED_REPLICAS), 0))
            now = "unknown" if replicas is None else f"{replicas:g}"
            frozen = Cost(
                what=f"{target} pinned at", unit="replicas", value=pinned, how=f"{now} now ({why or '/scale'})"
            )
        return Price(costs=(frozen, *await self._demand(ctx, obj, ref)))

    async def _replicas(self, ctx: Ctx, ref: dict[str, Any], kind: str) -> tuple[float | None, str]:
        try:
            scale = await ctx.kube.get(await scale_path(ctx, ctx.target.namespace or "default", ref))
        except (KubeError, LeverRefusal) as e:
            return None, f"its /scale could not be read: {e}"
        spec = (scale.get("spec") or {}).get("replicas")
        status = (scale.get("status") or {}).get("replicas")
        if not isinstance(spec, int):
            return None, "its /scale has no spec.replicas"
        return float(spec), "" if status in (None, spec) else f"its /scale now; {status} running"

    async def _demand(self, ctx: Ctx, obj: dict[str, Any], ref: dict[str, Any]) -> list[Cost]:
        pol = ctx.policy.price.keda_pause
        if pol.demand_query is not None:
            named = fill(pol.demand_query, namespace=ctx.target.namespace or "", target=str(ref.get("name")))
            queries = [("demand (policy price.keda-pause.demand_query)", named)]
        else:
            triggers = (obj.get("spec") or {}).get("triggers") or []
            queries = [
                (f"demand (trigger {n}: {t.get('metadata', {}).get('query')})", str(t["metadata"]["query"]))
                for n, t in enumerate(triggers)
                if isinstance(t, dict) and t.get("type") == "prometheus" and (t.get("metadata") or {}).get("query")
            ]
            if not queries:
                kinds = ", ".join(sorted({str(t.get("type")) for t in triggers if isinstance(t, dict)})) or "none"
                why = f"no prometheus trigger (triggers: {kinds}) and no policy price.keda-pause.demand_query"
                return [Cost(what="demand trend", unit="trigger value", value=None, how=why)]
        now = ctx.svc.clock.now()
        ago = now - pol.trend_minutes * 60
        costs = []
        for what, q in queries:
            (then, why_then), (cur, why_now) = await asyncio.gather(
                pricing.figure(ctx.svc, q, ago), pricing.figure(ctx.svc, q, now)
            )
            if cur is None:
                costs.append(Cost(what=what, unit="now", value=None, how=why_now))
                continue
            if then is None:
                trend = f"{pol.trend_minutes:g} min ago unknown: {why_then}"
            else:
                way = "rising" if cur > then else "falling" if cur < then else "flat"
                trend = f"{pol.trend_minutes:g} min ago {show(then)}: {way}"
            costs.append(Cost(what=what, unit="now", value=round(cur, 3), how=trend))
        return costs
