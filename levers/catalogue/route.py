"""route-weight: step one HTTPRoute backend's weight along the policy's steps.

Steps are percent of the backend's baseline (its weight when this incident
first stepped it), one step at a time, with a minimum dwell, and only when
every receiving cell has headroom. The JSON patch tests the backend's name,
its current weight and the resourceVersion, so a concurrent edit fails
instead of being overwritten.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.chat import quote
from bot.clock import hhmm
from bot.policy.levers import LeverRule
from levers import headroom
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, NoParams
from levers.plan import (
    Plan,
    is_absent,
    provenance_ops,
    ptr,
    read,
    with_provenance,
)
from levers.store import lever_store


class RouteParams(NoParams):
    backend: str = Field(min_length=1, max_length=253)
    weight: int | None = Field(default=None, ge=0, le=1_000_000)
    rule: int | None = Field(default=None, ge=0)


def _field(ctx: Ctx, rule: int, backend: str) -> str:
    return f"{ctx.context}/{ctx.target}/{rule}/{backend}"


def _find(obj: dict[str, Any], backend: str, rule: int | None) -> tuple[int, int]:
    rules = (obj.get("spec") or {}).get("rules") or []
    hits = [
        (r, i)
        for r, rl in enumerate(rules)
        for i, b in enumerate(rl.get("backendRefs") or [])
        if b.get("name") == backend and (rule is None or r == rule)
    ]
    if not hits:
        names = sorted({b.get("name") for rl in rules for b in rl.get("backendRefs") or []})
        where = f" in rule {rule}" if rule is not None else ""
        raise LeverRefusal(
            f"No backend `{quote(backend)}`{where} on this route (backends: {', '.join(names) or 'none'})."
        )
    if len(hits) > 1:
        raise LeverRefusal(f"`{quote(backend)}` is in rules {', '.join(str(r) for r, _ in hits)}: add rule=<n>.")
    return hits[0]


class RouteWeight(Lever):
    name = "route-weight"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("HTTPRoute", "gateway.networking.k8s.io", "v1", "httproutes", namespaced=True)
    needs = (Access.on(kind, "get", "patch"),)  # the headroom check asks Prometheus, not the API server
    summary = "step one backend's weight (100→50→0 % of baseline) after a headroom check"
    Params = RouteParams
    usage = "backend=<cell-us-east-3> [weight=<next step>] [rule=<n>]"
    fleet_default = True

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        p = ctx.params_as(RouteParams)
        pol = ctx.policy.route_weight
        r, i = _find(obj, p.backend, p.rule)
        refs = obj["spec"]["rules"][r]["backendRefs"]
        current = refs[i].get("weight", 1)  # Gateway API default weight
        fld = _field(ctx, r, p.backend)
        stored = await lever_store(ctx.svc).route_baseline(ctx.incident, fld)
        baseline = stored if stored is not None else current
        per_step = [round(baseline * s / 100) for s in pol.steps_percent]
        if baseline > 0 and len(set(per_step)) < len(per_step):
            # Two steps land on one whole weight (50% of 1 rounds to 0): stepping would skip a step,
            # and at the default weight 1 the first step would drain the backend.
            pcts = " → ".join(f"{s}" for s in pol.steps_percent)
            lost = next(s for s, w in zip(pol.steps_percent, per_step, strict=True) if per_step.count(w) > 1 and s)
            raise LeverRefusal(
                f"{p.backend}'s baseline weight {baseline} can't be stepped along {pcts} % without skipping a step "
                f"({lost}% of {baseline} is not a whole weight). "
                f"Set explicit weights on rule {r} first, e.g. 100 on each backend "
                f"(kubectl edit httproute {ctx.target.name} -n {ctx.target.namespace}: "
                "an unset weight is the Gateway API's default, 1), then pull route-weight again."
            )
        weights = sorted(set(per_step), reverse=True)
        down = next((w for w in weights if w < current), None)
        up = min((w for w in weights if w > current), default=None)
        new = p.weight if p.weight is not None else down
        steps = " → ".join(f"{w}" for w in weights)
        if new is None:
            raise LeverRefusal(f"{p.backend} is at {current}, the last step of {steps} (baseline {baseline}).")
        if new not in (down, up):
            nxt = f"the next step is weight={down}" if down is not None else "it is at the last step"
            back = f" (or back to weight={up})" if up is not None else ""
            raise LeverRefusal(
                f"One step at a time along {steps} (baseline {baseline}): {p.backend} is at {current}; {nxt}{back}."
            )
        if new < current:
            receivers = [b["name"] for j, b in enumerate(refs) if j != i and b.get("weight", 1) > 0]
            if not receivers:
                raise LeverRefusal(
                    f"No other backend of rule {r} has weight > 0: {p.backend}'s traffic would have nowhere to go."
                )
        else:
            receivers = [p.backend]
        ctx.scratch.update(receivers=receivers)
        pointer = ptr("spec", "rules", r, "backendRefs", i, "weight")
        changes: dict[str, Any] = {pointer: new}
        pre: dict[str, Any] = {pointer: read(obj, pointer)}
        with_provenance(obj, changes, pre, ctx.req_id, ctx.incident)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
            {"op": "test", "path": ptr("spec", "rules", r, "backendRefs", i, "name"), "value": p.backend},
        ]
        if not is_absent(pre[pointer]):
            ops.append({"op": "test", "path": pointer, "value": current})
        ops.append({"op": "add", "path": pointer, "value": new})
        ops += provenance_ops(pre, ctx.req_id, ctx.incident)
        call = self.json_patch_call(ctx, ops)
        pct = round(100 * new / baseline) if baseline else 0
        return Plan(
            [call],
            changes,
            pre,
            f"{p.backend} weight {current}→{new} ({pct}% of baseline {baseline})",
            meta={"field": fld, "baseline": baseline},
        )

    async def check(self, ctx: Ctx, plan: Plan, obj: dict[str, Any]) -> None:
        dwell = ctx.policy.route_weight.min_dwell_minutes * 60
        last = await lever_store(ctx.svc).route_last_step(ctx.incident, plan.meta["field"])
        now = ctx.svc.clock.now()
        if last is not None and now - last < dwell:
            raise LeverRefusal(
                f"Dwell: the last step of this backend was at {hhmm(last)} UTC; the next is allowed at "
                f"{hhmm(last + dwell)} UTC (minimum {dwell / 60:g} min between steps: watch the receivers)."
            )
        cells = []
        for backend in ctx.scratch["receivers"]:
            cell = ctx.policy.route_weight.cell_of(backend)
            if cell is None:
                raise LeverRefusal(
                    f"Can't tell which cell backend `{backend}` is (policy route_weight.backend_cells); "
                    "no headroom check, so nothing changed."
                )
            cells.append(cell)
        plan.notes.append(await headroom.check(ctx.svc, cells))

    async def applied(self, ctx: Ctx, plan: Plan) -> None:
        await lever_store(ctx.svc).route_stepped(
            ctx.incident, plan.meta["field"], plan.meta["baseline"], ctx.svc.clock.now()
        )
