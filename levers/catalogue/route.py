"""route-weight: step one HTTPRoute backend's weight along the policy's steps.

Steps are percent of the backend's baseline (its weight when this incident
first stepped it), one step at a time, with a minimum dwell, and only when
every receiving cell has headroom. The JSON patch tests the backend's name,
its current weight and the resourceVersion, so a concurrent edit fails
instead of being overwritten.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import Field

from bot.chat import quote
from bot.clock import hhmm
from bot.policy.levers import LeverRule
from levers import headroom, pricing
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, NoParams, Writes
from levers.plan import (
    Plan,
    is_absent,
    provenance_ops,
    ptr,
    read,
    with_provenance,
)
from levers.price import Cost, Price, show
from levers.store import lever_store

_WEIGHT = re.compile(r"^/spec/rules/(\d+)/backendRefs/(\d+)/weight$")
# What policy price.route-weight.rate_query reads by default: every route's requests to a backend's cell.
CELL_RATE = "its cell's vLLM finished requests, all routes"


async def _no_route_query() -> tuple[float | None, str]:
    return None, "no policy price.route-weight.route_rate_query"


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

    def writes(self, ctx: Ctx, path: str) -> Writes:
        """One backend's weight, at the rule and index the route had when planned (the object decides those)."""
        p = ctx.params_as(RouteParams)
        weight = p.weight
        return {_WEIGHT: lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0 and weight in (None, v)}

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
        burns = await headroom.burn_rates(ctx.svc, cells)
        ctx.scratch["burns"] = burns  # the price names each receiver's burn: not asked twice
        plan.notes.append(headroom.verdict(ctx.svc, burns))

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The share of the route's traffic the step moves (from the weights), the request rate that is
        (the backend cells' vLLM rates, policy price.route-weight), and each receiver after the step."""
        step = next(((m, v) for p, v in plan.changes.items() if (m := _WEIGHT.match(p))), None)
        if step is None:
            return Price(notes=("the plan sets no backend weight, so nothing moves",))
        r, i = int(step[0].group(1)), int(step[0].group(2))
        new = int(step[1])
        refs = obj["spec"]["rules"][r]["backendRefs"]
        weights = [int(b.get("weight", 1)) for b in refs]
        name = str(refs[i].get("name"))
        current, total = weights[i], sum(weights)
        after = total - current + new
        share = current / total if total else 0.0
        share_after = new / after if after else 0.0
        down = new < current
        others = [j for j, w in enumerate(weights) if j != i and w > 0]
        route = f"route {ctx.target} rule {r}"
        costs = [
            Cost(
                what=f"{name}'s share of {route}",
                unit="% of route traffic",
                value=round(abs(share - share_after) * 100, 1),
                how=f"{share * 100:.1f}% → {share_after * 100:.1f}% (weights {current}/{total} → {new}/{after})",
            )
        ]
        names = [str(refs[j].get("name")) for j in [i, *others]]
        route_q = ctx.policy.price.route_weight.render_route(ctx.target.namespace or "", ctx.target.name, r)
        rates, route_rate = await asyncio.gather(
            self._rates(ctx, names),
            pricing.figure(ctx.svc, route_q) if route_q is not None else _no_route_query(),
        )
        moved: float | None
        what = f"traffic moved {'off' if down else 'onto'} {name}"
        if route_q is not None:
            # This route's own requests: the share the step moves of them is exact, whatever else the
            # backends' cells serve.
            rate, why = route_rate
            moved = None if rate is None else rate * abs(share - share_after)
            how = (
                f"this route's rate: {why}"
                if rate is None
                else f"this route's {show(rate)} req/s (policy price.route-weight.route_rate_query) x "
                f"{abs(share - share_after) * 100:.1f}% of its traffic"
            )
        elif down:
            rate, why = rates[name]
            # The backend keeps share_after/share of its traffic (down: share > 0, its weight was > 0).
            taken = 1 - share_after / share
            moved = None if rate is None else rate * taken
            how = (
                why
                if rate is None
                else f"{name} serves {show(rate)} req/s now ({CELL_RATE}); the step takes {taken:.0%}"
            )
        else:
            known = [rates[str(refs[j].get("name"))] for j in others]
            unread = [f"{refs[j].get('name')}: {w}" for j, (v, w) in zip(others, known, strict=True) if v is None]
            growth = 1 - total / after if after else 0.0
            moved = None if unread else sum(v or 0.0 for v, _ in known) * growth
            how = "; ".join(unread) or f"{growth:.0%} of the other backends' traffic comes back to {name} ({CELL_RATE})"
        costs.append(Cost(what=what, unit="req/s", value=None if moved is None else round(moved, 2), how=how))
        receivers = others if down else [i]
        recv_weight = sum(weights[j] for j in receivers)
        burns: dict[str, float | None] = ctx.scratch.get("burns") or {}
        notes = []
        for j in receivers:
            rname = str(refs[j].get("name"))
            rate, why = rates[rname]
            cell = ctx.policy.route_weight.cell_of(rname)
            if rate is None:
                load = f"request rate unknown ({why})"
            elif moved is None:
                load = f"{show(rate)} req/s now ({CELL_RATE}), after the step unknown (the rate moved is unknown)"
            else:
                gain = moved if not down else moved * weights[j] / recv_weight
                load = f"{show(rate)} → {show(rate + gain)} req/s after the step ({CELL_RATE})"
            burn = f"; TTFT burn 1h {headroom.burn_text(burns[cell])}" if cell in burns else ""
            notes.append(f"receiver {rname} ({cell or 'cell unknown'}): {load}{burn}")
        return Price(costs=tuple(costs), notes=tuple(notes))

    async def _rates(self, ctx: Ctx, backends: list[str]) -> dict[str, tuple[float | None, str]]:
        """Each backend's request rate (req/s) from its cell's series, or None and why."""
        rate = ctx.policy.price.route_weight

        async def one(backend: str) -> tuple[float | None, str]:
            cell = ctx.policy.route_weight.cell_of(backend)
            if cell is None:
                return None, f"can't tell which cell backend {backend} is (policy route_weight.backend_cells)"
            return await pricing.figure(ctx.svc, rate.render(cell))

        got = await asyncio.gather(*(one(b) for b in backends))
        return dict(zip(backends, got, strict=True))

    async def applied(self, ctx: Ctx, plan: Plan) -> None:
        await lever_store(ctx.svc).route_stepped(
            ctx.incident, plan.meta["field"], plan.meta["baseline"], ctx.svc.clock.now()
        )
