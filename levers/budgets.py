"""Node-quarantine budgets: a rate per cell per hour and a minHealthy floor.

The rate is a Redis sorted set per cell (member = request id, score = time).
The floor counts the cell's quarantined GPU nodes: those the API listing (read
at plan time) shows tainted, plus Firebreak's own places in a per-cell sorted
set (node -> +inf while its write is in flight, then the time it landed).
Checking at plan time refuses early; the one Lua reservation just before
apply takes the rate and the floor place together, so concurrent pulls can't
both squeeze under either limit. Dry-runs only check.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.store import Keys
from levers.base import LeverRefusal
from levers.lua import Lua

if TYPE_CHECKING:
    from levers.base import Ctx

HOUR = 3600.0

# KEYS: rate zset, floor zset, floor owners hash (node -> request).
# ARGV: now, rate limit, window, request, node, total GPU nodes, max fraction, listed_at, override (1/0),
#       then the nodes the API listing showed quarantined.
# -> {'ok'} | {'rate', used} | {'floor', quarantined before, after, total}
_RESERVE = Lua("""
local now, req, node = tonumber(ARGV[1]), ARGV[4], ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
if not redis.call('ZSCORE', KEYS[1], req) then
  local used = redis.call('ZCARD', KEYS[1])
  if used >= tonumber(ARGV[2]) then return {'rate', used} end
end
local listed = {}
for i = 10, #ARGV do listed[ARGV[i]] = true end
-- A place that landed before the listing was read, yet the listing doesn't show it: lifted since.
for _, n in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[8])) do
  if not listed[n] then redis.call('ZREM', KEYS[2], n); redis.call('HDEL', KEYS[3], n) end
end
local out, count = {}, 0
for n, _ in pairs(listed) do out[n] = true; count = count + 1 end
for _, n in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not out[n] then out[n] = true; count = count + 1 end
end
local after = count
if not out[node] then after = count + 1 end
local total = tonumber(ARGV[6])
if ARGV[9] ~= '1' and total > 0 and after / total > tonumber(ARGV[7]) then
  return {'floor', count, after, total}
end
redis.call('ZADD', KEYS[1], now, req)
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) * 2)
redis.call('ZADD', KEYS[2], '+inf', node)
redis.call('HSET', KEYS[3], node, req)
return {'ok'}
""")

# KEYS: floor zset, owners hash. ARGV: node, request, 'landed' (score now) | 'free'. Only the owner moves it.
_FLOOR = Lua("""
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == 'free' then
  redis.call('ZREM', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], 'XX', ARGV[4], ARGV[1])
end
return 1
""")


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


def _floor_keys(cell: str) -> list[str]:
    return [Keys.levers(f"quarantined:{cell}"), Keys.levers(f"quarantined-by:{cell}")]


def _rate_text(cell: str, used: int, limit: int) -> str:
    return (
        f"Quarantine budget: {cell} already had {used} node quarantine(s) in the last hour; "
        f"the budget is {limit} per hour. A burst like this is usually a bad exporter: "
        "look at the remediation rate before quarantining more."
    )


def _floor_text(ctx: "Ctx", node: str, before: int, after: int, total: int) -> str:
    frac = ctx.policy.node_quarantine.max_quarantined_fraction
    return (f"Quarantine floor: {ctx.cell} has {before} of {total} GPU nodes quarantined; "
            f"{node} would make it {after} of {total} ({after / total:.0%}), above the policy "
            f"maximum of {frac:.0%}. Check whether the signal itself is wrong.")


async def check_rate(ctx: "Ctx") -> None:
    pol = ctx.policy.node_quarantine
    now = ctx.svc.clock.now()
    used = await ctx.svc.redis.zcount(_key(ctx.cell), now - HOUR, "+inf")
    if used >= pol.per_cell_per_hour:
        _breach(ctx, _rate_text(ctx.cell, used, pol.per_cell_per_hour))


def check_floor(ctx: "Ctx", nodes: list[dict[str, Any]], node: str) -> str:
    """A breach when quarantining `node` would put more than the policy's fraction of GPU nodes out.

    Remembers the listing in ctx.scratch: `reserve` re-counts against it atomically.
    """
    pol = ctx.policy.node_quarantine
    names = {n["metadata"]["name"] for n in nodes}
    out = {n["metadata"]["name"] for n in nodes
           if any(t.get("key") == pol.taint_key for t in (n.get("spec") or {}).get("taints") or [])}
    after = out | ({node} & names)
    total = len(names)
    ctx.scratch.update(floor_total=total, floor_out=sorted(out), floor_listed_at=ctx.svc.clock.now())
    if total and len(after) / total > pol.max_quarantined_fraction:
        _breach(ctx, _floor_text(ctx, node, len(out), len(after), total))
    return f"{len(after)} of {total} GPU nodes in {ctx.cell} quarantined after this"


async def reserve(ctx: "Ctx") -> None:
    pol = ctx.policy.node_quarantine
    script = _RESERVE.on(ctx.svc.redis)
    # An approved override still counts against the budgets; it just may not be refused by them.
    limit = 2**31 if ctx.budget_override else pol.per_cell_per_hour
    got = await script(keys=[_key(ctx.cell), *_floor_keys(ctx.cell)], args=[
        ctx.svc.clock.now(), limit, HOUR, ctx.req_id, ctx.target.name, ctx.scratch["floor_total"],
        pol.max_quarantined_fraction, ctx.scratch["floor_listed_at"], int(ctx.budget_override),
        *ctx.scratch["floor_out"]])
    if got[0] == "rate":
        raise LeverRefusal(_rate_text(ctx.cell, int(got[1]), pol.per_cell_per_hour))
    if got[0] == "floor":
        raise LeverRefusal(_floor_text(ctx, ctx.target.name, int(got[1]), int(got[2]), int(got[3])))


async def _floor(ctx: "Ctx", how: str) -> None:
    script = _FLOOR.on(ctx.svc.redis)
    await script(keys=_floor_keys(ctx.cell), args=[ctx.target.name, ctx.req_id, how, ctx.svc.clock.now()])


async def landed(ctx: "Ctx") -> None:
    """The taint is on the node: from now on a listing read after this moment shows it."""
    await _floor(ctx, "landed")


async def release(ctx: "Ctx") -> None:
    """Nothing was applied: give back the hour's slot and the floor place."""
    await ctx.svc.redis.zrem(_key(ctx.cell), ctx.req_id)
    await _floor(ctx, "free")


async def freed(ctx: "Ctx") -> None:
    """Undone: the node is back in service (the hour's slot stays used: it counts quarantines)."""
    await _floor(ctx, "free")
