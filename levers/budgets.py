"""Node-quarantine budgets: a rate per cell per hour and a minHealthy floor.

The rate is a Redis sorted set per cell (member = request id, score = time).
The floor counts the cell's quarantined GPU nodes: those the API listing (read
at plan time) shows tainted, plus Firebreak's own places in a per-cell sorted
set (node -> +inf while its write is in flight, then the time it landed).
Checking at plan time refuses early; the one Lua reservation just before
apply takes the rate and the floor place together, so concurrent pulls can't
both squeeze under either limit. Dry-runs only check. The Redis side
(keys and scripts) is levers/store.py; the figures and wording are here.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from levers import outofservice
from levers.base import Ctx, LeverRefusal
from levers.store import Reserved, lever_store

HOUR = 3600.0

OVERRIDE_HINT = (
    " To go over it anyway, add `override=budget` to the same command: it then needs a second person's approval."
)


class BudgetRefusal(LeverRefusal):
    """A budget said no; `override=budget` turns this into an approval request."""


def _breach(ctx: Ctx, message: str) -> None:
    if ctx.budget_override:
        ctx.breaches.append(message)
        return
    raise BudgetRefusal(message + OVERRIDE_HINT)


def _rate_text(cell: str, used: int, limit: int) -> str:
    return (
        f"Quarantine budget: {cell} already had {used} node quarantine(s) in the last hour; "
        f"the budget is {limit} per hour. A burst like this is usually a bad exporter: "
        "look at the remediation rate before quarantining more."
    )


def allowed_out(total: int, fraction: float) -> int:
    """How many of `total` GPU nodes may be quarantined: the policy's fraction, rounded down, but at
    least one node whenever the fraction is above zero (10% of a 5-node cell is one node, not none)."""
    if total <= 0 or fraction <= 0:
        return 0
    return max(1, math.floor(total * fraction + 1e-9))  # 1e-9: 0.3 * 10 is 2.9999999999999996


def _floor_text(ctx: Ctx, node: str, before: int, after: int, total: int) -> str:
    frac = ctx.policy.node_quarantine.max_quarantined_fraction
    small = " (at least one node in any cell)" if frac > 0 and total * frac < 1 else ""
    return (
        f"Quarantine floor: {ctx.cell} has {before} of {total} GPU nodes quarantined; "
        f"{node} would make it {after} of {total} ({after / total:.0%}), above the policy "
        f"maximum of {frac:.0%}{small}. Check whether the signal itself is wrong."
    )


def _who(found: list[outofservice.OutNode]) -> str:
    return f" Out now, by who: {outofservice.by_who(found)}." if found else ""


async def check_rate(ctx: Ctx) -> None:
    pol = ctx.policy.node_quarantine
    now = ctx.svc.clock.now()
    used = await lever_store(ctx.svc).quarantines_since(ctx.cell, now - HOUR)
    if used >= pol.per_cell_per_hour:
        _breach(ctx, _rate_text(ctx.cell, used, pol.per_cell_per_hour))


def check_floor(ctx: Ctx, nodes: list[dict[str, Any]], node: str) -> str:
    """A breach when quarantining `node` would put more than the policy's fraction of GPU nodes out.

    Remembers the listing in ctx.scratch: `reserve` re-counts against it atomically.
    """
    pol = ctx.policy.node_quarantine
    names = {n["metadata"]["name"] for n in nodes}
    # Every node that can't take work counts, whoever made it so (levers/outofservice.py).
    found = outofservice.out_of_service(nodes, pol.taint_key, pol.dedicated_taints)
    out = {o.name for o in found}
    after = out | ({node} & names)
    total = len(names)
    ctx.scratch.update(floor_total=total, floor_out=sorted(out), floor_listed_at=ctx.svc.clock.now())
    if total and len(after) > allowed_out(total, pol.max_quarantined_fraction):
        _breach(ctx, _floor_text(ctx, node, len(out), len(after), total) + _who(found))
    return f"{len(after)} of {total} GPU nodes in {ctx.cell} quarantined after this"


async def reserve(ctx: Ctx) -> None:
    pol = ctx.policy.node_quarantine
    # An approved override still counts against the budgets; it just may not be refused by them.
    limit = 2**31 if ctx.budget_override else pol.per_cell_per_hour
    got = await lever_store(ctx.svc).reserve_quarantine(
        ctx.cell,
        ctx.req_id,
        ctx.target.name,
        now=ctx.svc.clock.now(),
        limit=limit,
        window=HOUR,
        total=ctx.scratch["floor_total"],
        # The script compares after/total with this; allowed/total makes it the same whole-node limit.
        max_fraction=allowed_out(ctx.scratch["floor_total"], pol.max_quarantined_fraction)
        / max(ctx.scratch["floor_total"], 1),
        listed_at=ctx.scratch["floor_listed_at"],
        override=ctx.budget_override,
        listed=ctx.scratch["floor_out"],
    )
    if got.code is Reserved.RATE:
        (used,) = got.detail
        raise LeverRefusal(_rate_text(ctx.cell, used, pol.per_cell_per_hour))
    if got.code is Reserved.FLOOR:
        before, after, total = got.detail
        raise LeverRefusal(_floor_text(ctx, ctx.target.name, before, after, total))


async def _floor(ctx: Ctx, how: Literal["landed", "free"]) -> None:
    # Only the request holding the node's place moves it: a stale release is a no-op.
    await lever_store(ctx.svc).move_floor(ctx.cell, ctx.target.name, ctx.req_id, how, ctx.svc.clock.now())


async def landed(ctx: Ctx) -> None:
    """The taint is on the node: from now on a listing read after this moment shows it."""
    await _floor(ctx, "landed")


async def release(ctx: Ctx) -> None:
    """Nothing was applied: give back the hour's slot and the floor place."""
    await lever_store(ctx.svc).release_rate(ctx.cell, ctx.req_id)
    await _floor(ctx, "free")


async def freed(ctx: Ctx) -> None:
    """Undone: the node is back in service (the hour's slot stays used: it counts quarantines)."""
    await _floor(ctx, "free")
