"""keda-pause: pause a ScaledObject with KEDA's own annotation, so scale-in can't destroy warm capacity.

By default it sets `autoscaling.keda.sh/paused: "true"`: KEDA v2.20 (controllers/keda/
scaledobject_controller.go handlePause, scaleTargetToPausedCount) stops its scale loop and leaves the
target at whatever replicas it has, so nothing is read and written back (reading the count and then
writing it races the autoscaler). Paused either way, KEDA deletes the HPA it owns, and recreates it
when the annotation goes.

`only=scale-in` sets `autoscaling.keda.sh/paused-scale-in: "true"` instead (KEDA 2.18 and later): KEDA keeps
its HPA and its scale loop, sets the HPA's `behavior.scaleDown.selectPolicy: Disabled` (controllers/keda/
hpa.go newHPAForScaledObject) and skips its own scale to zero or idle (pkg/scaling/executor/
scale_scaledobjects.go scaleToZeroOrIdle), so nothing scales in and scale-out goes on: the freeze a
registry outage wants, where warm capacity can't be hydrated back but demand may still grow. Verify
reads KEDA's effect, that HPA's Disabled scale-down, not the annotation written.

`replicas=<n>` pins the target at n instead (`autoscaling.keda.sh/paused-replicas`: KEDA scales the
target to n through /scale when it reconciles the ScaledObject; it does not watch the target, so a
count someone else writes later stands, as the real operator shows in tests/realkube/test_keda_real.py);
`replicas=current` reads the count from the target's /scale first (which
races the autoscaler). The target's resource (plural) is looked up in the cluster's discovery, as
KEDA does through its REST mapper, never derived from the kind's spelling.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

from pydantic import field_validator

from bot.chat.text import code
from bot.clusters import KubeError
from bot.policy.levers import LeverRule
from bot.prom import Failed, PromQuery, Why
from bot.prom.promql import fill
from levers import pricing
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, NoParams, Target, Verified, Writes, awaited
from levers.catalogue.simple import merge_plan
from levers.plan import Plan, is_absent, ptr, read
from levers.price import Cost, Price, show

PAUSED = "autoscaling.keda.sh/paused"  # v1alpha1.PausedAnnotation: freeze at the current count
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"  # v1alpha1.PausedReplicasAnnotation
PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"  # v1alpha1.PausedScaleInAnnotation (KEDA 2.18+)
# The annotations keda-pause writes (tools/deploygen lets Firebreak change these and no other).
PAUSE_ANNOTATIONS = (PAUSED, PAUSED_REPLICAS, PAUSED_SCALE_IN)
# KEDA's HPA (autoscaling/v2, controllers/keda/hpa.go): where a scale-in pause takes effect.
HPA = Kind("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", namespaced=True)
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


# scaleTargetRef is cluster data anyone who may edit the ScaledObject writes: its name goes into an API
# path and into chat, so it must be an object's name (a DNS-1123 subdomain: no `/`, `..` or markup), its
# kind a kind's spelling and its apiVersion a group/version's.
_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+([a-z]+[0-9]+)?")


async def scale_path(ctx: Ctx, namespace: str, ref: dict[str, Any]) -> str:
    """The /scale path of the ScaledObject's target; LeverRefusal unless scaleTargetRef names an object by
    a Kubernetes name, of a kind the cluster serves with a /scale subresource (what KEDA can scale)."""
    api_version = ref.get("apiVersion") or DEFAULT_API_VERSION
    kind = ref.get("kind") or DEFAULT_KIND
    name = ref.get("name")
    where = f"ScaledObject {ctx.target}'s spec.scaleTargetRef"
    if not isinstance(name, str) or len(name) > 253 or not _DNS1123.fullmatch(name):
        raise LeverRefusal(f"{where}.name {code(str(name), 80)} is not a Kubernetes name; nothing to freeze.")
    if not isinstance(api_version, str) or not _API_VERSION.fullmatch(api_version):
        raise LeverRefusal(f"{where}.apiVersion {code(str(api_version), 80)} is not an API group/version.")
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise LeverRefusal(f"{where}.kind {code(str(kind), 80)} is not a kind KEDA can scale.")
    plural = await ctx.kube.plural_for(api_version, kind)
    if plural is None:
        raise LeverRefusal(
            f"ScaledObject {ctx.target} scales a {kind} ({api_version}), a kind this cluster does not serve: "
            "check spec.scaleTargetRef, and that the kind's CRD is installed."
        )
    if not await ctx.kube.scales(api_version, plural):
        raise LeverRefusal(
            f"ScaledObject {ctx.target} scales a {kind} ({api_version}), not a kind KEDA can scale "
            f"(the cluster serves no {plural}/scale)."
        )
    group, _, version = api_version.rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{plural}/{name}/scale"


class KedaParams(NoParams):
    replicas: int | Literal["current"] | None = None
    only: Literal["scale-in"] | None = None  # paused-scale-in: no scale-in, scale-out goes on

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
    `paused: "false"` is not one and an unparsable value is; `paused-scale-in` is read the same way);
    `paused-replicas` always is."""
    return key == PAUSED_REPLICAS or value not in _GO_FALSE


def hpa_name(so: dict[str, Any]) -> str:
    """The HPA KEDA keeps for the ScaledObject (controllers/keda/scaledobject_controller.go
    getHPANameOnEnsure): the one its status names, else spec.advanced's name, else keda-hpa-<name>."""
    named = ((so.get("status") or {}).get("hpaName")) or (
        ((so.get("spec") or {}).get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
    ).get("name")
    return str(named or f"keda-hpa-{so['metadata']['name']}")


class KedaPause(Lever):
    name = "keda-pause"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects", namespaced=True)
    # The target's /scale is read for replicas=current and for the price (the replicas frozen); its
    # plural comes from discovery. KEDA's HPA is read to verify only=scale-in.
    needs = (Access.on(kind, "get", "patch"), *SCALE_TARGETS, Access.on(HPA, "get"))
    summary = (
        "pause a ScaledObject with KEDA's paused annotation: its target keeps its replicas "
        "(only=scale-in: no scale-in, scale-out goes on)"
    )
    Params = KedaParams
    usage = "[replicas=<n>|current] [only=scale-in]"

    def writes(self, ctx: Ctx, path: str) -> Writes:
        p = ctx.params_as(KedaParams)
        if p.only == "scale-in":
            return {ptr("metadata", "annotations", PAUSED_SCALE_IN): "true"}
        if p.replicas is None:
            return {ptr("metadata", "annotations", PAUSED): "true"}
        count = p.replicas
        return {
            ptr("metadata", "annotations", PAUSED_REPLICAS): (
                str(count) if isinstance(count, int) else lambda v: isinstance(v, str) and v.isdigit()
            )
        }

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        p = ctx.params_as(KedaParams)
        ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
        if not ref.get("name"):
            raise LeverRefusal(f"ScaledObject {ctx.target} has no spec.scaleTargetRef.name; nothing to freeze.")
        await scale_path(ctx, ctx.target.namespace or "default", ref)  # refused unless a scalable kind and name
        kind = ref.get("kind") or DEFAULT_KIND
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if p.only == "scale-in" and p.replicas is not None:
            raise LeverRefusal(
                "only=scale-in keeps the autoscaler scaling out; replicas= pins one count. Give one of them: "
                f"`keda-pause {ctx.target} only=scale-in` or `keda-pause {ctx.target} replicas={p.replicas}`."
            )
        keys = (PAUSED_REPLICAS, PAUSED, PAUSED_SCALE_IN) if p.only else (PAUSED_REPLICAS, PAUSED)
        held = [k for k in keys if k in annotations and reads_paused(k, annotations[k])]
        if held:
            # KEDA reads these already (paused-replicas wins; a full pause holds scale-in too): another
            # pause changes nothing or moves the count, and its undo would take away a pause someone else set.
            said = ", ".join(f"{k}={annotations[k]!r}" for k in held)
            raise LeverRefusal(
                f"ScaledObject {ctx.target} already carries {said}, which KEDA reads as paused: nothing to do. "
                f"To hand it back to the autoscaler: kubectl annotate scaledobject {ctx.target.name} "
                f"-n {ctx.target.namespace} {held[0]}-"
            )
        if p.only == "scale-in":
            return merge_plan(
                self,
                ctx,
                obj,
                {ptr("metadata", "annotations", PAUSED_SCALE_IN): "true"},
                f"scale-in paused ({kind} {ref['name']} keeps at least its replicas, scale-out goes on; "
                f"{PAUSED_SCALE_IN}=true)",
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

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        landed = await super().verify(ctx, plan, after)
        if not landed.ok or ptr("metadata", "annotations", PAUSED_SCALE_IN) not in plan.changes:
            return landed
        # The annotation alone holds nothing: KEDA's HPA does, once KEDA (2.18+) has reconciled it. Its
        # copy of our annotation on the HPA (KEDA copies the ScaledObject's) says the Disabled is KEDA's
        # answer to this write, not a behavior someone set before. Give KEDA a bounded while.
        name = hpa_name(after)
        path = HPA.path(Target(ctx.target.namespace, name))
        seconds = ctx.policy.rollout_verify_seconds
        hpa: dict[str, Any] | None = None
        copied: Any = None
        down: Any = None

        async def disabled() -> Verified | None:
            nonlocal hpa, copied, down
            try:
                hpa = await ctx.kube.get(path)
            except KubeError as e:
                if e.code != 404:
                    return Verified(False, f"{PAUSED_SCALE_IN} set, but KEDA's HPA {name} could not be read: {e}")
                hpa = None
                return None
            copied = ((hpa.get("metadata") or {}).get("annotations") or {}).get(PAUSED_SCALE_IN)
            down = read(hpa, "/spec/behavior/scaleDown/selectPolicy")
            if copied != "true" or down != "Disabled":
                return None
            up = read(hpa, "/spec/behavior/scaleUp/selectPolicy")
            out = "scale-out paused too (paused-scale-out)" if up == "Disabled" else "scale-out goes on"
            return Verified(True, f"KEDA disabled scale-down on its HPA {name}; {out}")

        if done := await awaited(seconds, disabled):
            return done
        seen = (
            "is not there"
            if hpa is None
            else f"has behavior.scaleDown.selectPolicy={'absent' if is_absent(down) else down}"
            + ("" if copied == "true" else f" and no {PAUSED_SCALE_IN} copied from the ScaledObject")
        )
        return Verified(
            False,
            f"{PAUSED_SCALE_IN} set, but KEDA's HPA {ctx.target.namespace}/{name} {seen} after {seconds:g}s: "
            "is KEDA 2.18 or later running? A KEDA before 2.18 ignores this annotation. "
            f"Watch `kubectl get hpa {name} -n {ctx.target.namespace} -o yaml`",
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
        if p.only == "scale-in":
            top = (obj.get("spec") or {}).get("maxReplicaCount")
            out = f"scale-out goes on, up to maxReplicaCount {top}" if top is not None else "scale-out goes on"
            frozen = Cost(
                what=f"{target} kept from scaling in below",
                unit="replicas",
                value=replicas,
                how=f"{why or 'its /scale now'}; {out}",
            )
        elif p.replicas is None:
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
        queries: list[tuple[str, str, dict[str, Any] | None]]
        if pol.demand_query is not None:
            named = fill(pol.demand_query, namespace=ctx.target.namespace or "", target=str(ref.get("name")))
            queries = [("demand (policy price.keda-pause.demand_query)", named, None)]
        else:
            triggers = (obj.get("spec") or {}).get("triggers") or []
            queries = [
                (f"demand (trigger {n}: {t.get('metadata', {}).get('query')})", str(t["metadata"]["query"]), t)
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
        for what, q, trigger in queries:
            (cur, why_now), (then, why_then), whose = await self._trend(ctx, q, trigger, now, ago)
            if cur is None:
                costs.append(Cost(what=what, unit="now", value=None, how=f"{why_now}; {whose}"))
                continue
            if then is None:
                trend = f"{pol.trend_minutes:g} min ago unknown: {why_then}"
            else:
                way = "rising" if cur > then else "falling" if cur < then else "flat"
                trend = f"{pol.trend_minutes:g} min ago {show(then)}: {way}"
            costs.append(Cost(what=what, unit="now", value=round(cur, 3), how=f"{trend}; {whose}"))
        return costs

    async def _trend(
        self, ctx: Ctx, q: str, trigger: dict[str, Any] | None, now: float, ago: float
    ) -> tuple[tuple[float | None, str], tuple[float | None, str], str]:
        """`q` now and `ago`, and whose Prometheus answered: the trigger's serverAddress (what KEDA
        scales on) when it answers, else Firebreak's, saying why the trigger's did not."""
        own = "Firebreak's Prometheus"
        if trigger is None:
            figures = await asyncio.gather(pricing.figure(ctx.svc, q, now), pricing.figure(ctx.svc, q, ago))
            return figures[0], figures[1], f"{own} (policy price.keda-pause.demand_query)"
        server, why_not = self._trigger_server(ctx, trigger)
        if server is not None:
            address = str(trigger["metadata"]["serverAddress"])
            if server is ctx.svc.prometheus:
                why_not = ""  # Firebreak's own Prometheus is the trigger's
            else:
                timeout = ctx.policy.price.timeout_seconds
                got_now, got_ago = await asyncio.gather(server.query(q, now, timeout), server.query(q, ago, timeout))
                if not isinstance(got_now, Failed):
                    return pricing.one(got_now, q), pricing.one(got_ago, q), f"the trigger's Prometheus {address}"
                # Firebreak sends it no credentials (PROMETHEUS_* are for PROMETHEUS_URL): a refusal is that.
                failed = (
                    f"HTTP {got_now.status}, Firebreak sends it no credentials" if got_now.why is Why.AUTH else got_now
                )
                why_not = f"the trigger's {address} did not answer ({failed})"
        figures = await asyncio.gather(pricing.figure(ctx.svc, q, now), pricing.figure(ctx.svc, q, ago))
        whose = f"{own}, the trigger's serverAddress" if not why_not else f"{own}; {why_not}"
        return figures[0], figures[1], whose

    def _trigger_server(self, ctx: Ctx, trigger: dict[str, Any]) -> tuple[PromQuery | None, str]:
        """The client for the trigger's serverAddress, or None and why it is not asked. KEDA's
        prometheus scaler (pkg/scalers/prometheus_scaler.go ExecutePromQuery, v2.21.0) also sends the
        trigger's `namespace`, `queryParameters` and `customHeaders`, and the credentials of its
        authenticationRef or authModes: Firebreak sends none of them, and a server asked without them may
        answer for another tenant, so such a trigger's server is not asked."""
        md = trigger.get("metadata") or {}
        address = md.get("serverAddress")
        if not isinstance(address, str) or not address.startswith(("http://", "https://")):
            return None, "the trigger names no http(s) serverAddress"
        extra = [k for k in ("namespace", "queryParameters", "customHeaders", "authModes") if md.get(k)]
        if trigger.get("authenticationRef"):
            extra.append("authenticationRef")
        if extra:
            said = ", ".join(extra)
            return None, f"the trigger's {address} is not asked: KEDA sends it {said}, which Firebreak does not"
        if ctx.svc.prometheus_at is None:
            return None, f"the trigger's {address} is not asked: this Firebreak asks no other Prometheus"
        try:
            return ctx.svc.prometheus_at(address), ""
        except LookupError as e:
            return None, f"the trigger's {address} is not asked: {e}"
