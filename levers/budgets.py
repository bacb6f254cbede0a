"""Node-quarantine budgets: a rate per cell per hour and a minHealthy floor.

The rate is a Redis sorted set per cell (member = request id, score = time).
Checking at plan time refuses early; the Lua reservation just before apply is
what holds under concurrency. Dry-runs only check.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.store import Keys
from levers.base import LeverRefusal

if TYPE_CHECKING:
    from levers.base import Ctx

HOUR = 3600.0

_RESERVE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[3]))
local used = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then return -1 end
if used >= tonumber(ARGV[2]) then return used end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) * 2)
return -1
"""


OVERRIDE_HINT = (" To go over it anyway, add `override=budget` to the same command: "
                 "it then needs a second person's approval.")


class BudgetRefusal(LeverRefusal):
    """A budget said no; `override=budget` turns this into an approval request."""


def _breach(ctx: "Ctx", message: str) -> None:
    if ctx.budget_override:
        ctx.breaches.append(message)
        return
    raise BudgetRefusal(message + OVERRIDE_HINT)


def _key(cell: str) -> str:
    return Keys.levers(f"quarantines:{cell}")


def _rate_text(cell: str, used: int, limit: int) -> str:
    return (
        f"Quarantine budget: {cell} already had {used} node quarantine(s) in the last hour; "
        f"the budget is {limit} per hour. A burst like this is usually a bad exporter: "
        "look at the remediation rate before quarantining more."
    )


async def check_rate(ctx: "Ctx") -> None:
    pol = ctx.policy.node_quarantine
    now = ctx.svc.clock.now()
    used = await ctx.svc.redis.zcount(_key(ctx.cell), now - HOUR, "+inf")
    if used >= pol.per_cell_per_hour:
        _breach(ctx, _rate_text(ctx.cell, used, pol.per_cell_per_hour))


def check_floor(ctx: "Ctx", nodes: list[dict[str, Any]], node: str) -> str:
    """A breach when quarantining `node` would put more than the policy's fraction of GPU nodes out."""
    pol = ctx.policy.node_quarantine
    names = {n["metadata"]["name"] for n in nodes}
    out = {n["metadata"]["name"] for n in nodes
           if any(t.get("key") == pol.taint_key for t in (n.get("spec") or {}).get("taints") or [])}
    after = out | ({node} & names)
    total = len(names)
    if total and len(after) / total > pol.max_quarantined_fraction:
        _breach(
            ctx,
            f"Quarantine floor: {ctx.cell} has {len(out)} of {total} GPU nodes quarantined; "
            f"{node} would make it {len(after)} of {total} ({len(after) / total:.0%}), above the policy "
            f"maximum of {pol.max_quarantined_fraction:.0%}. Check whether the signal itself is wrong.")
    return f"{len(after)} of {total} GPU nodes in {ctx.cell} quarantined after this"


async def reserve(ctx: "Ctx") -> None:
    pol = ctx.policy.node_quarantine
    script = ctx.svc.redis.register_script(_RESERVE)
    # An approved override still counts against the budget; it just may not be refused by it.
    limit = 2**31 if ctx.budget_override else pol.per_cell_per_hour
    used = int(await script(keys=[_key(ctx.cell)], args=[ctx.svc.clock.now(), limit, HOUR, ctx.req_id]))
    if used >= 0:
        raise LeverRefusal(_rate_text(ctx.cell, used, pol.per_cell_per_hour))


async def release(ctx: "Ctx") -> None:
    await ctx.svc.redis.zrem(_key(ctx.cell), ctx.req_id)
