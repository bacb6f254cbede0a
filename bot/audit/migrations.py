"""The audit log's state migrations: their steps (bot/runtime.py MIGRATIONS lists them in
order, as bot.schema Migrations: the schema layer sits above this one)."""

from __future__ import annotations

from bot.store import Keys, Redis, script

BATCH = 1000  # entries moved per script: each call is short, so Redis keeps serving meanwhile

# Move the oldest BATCH entries of the old list layout into the entries hash, each at its
# position's seq (counted on from KEYS[3]), and trim them off the list, in one script: a crash
# between two calls leaves every entry in exactly one place, and the next call carries on.
# Positions, not the entries' own seq fields: a log that was tampered with stays as it was, for
# `audit verify` to name. An older replica's appends meanwhile push onto the list's tail.
#   KEYS[1] the old list   KEYS[2] the entries hash   KEYS[3] the seq moved so far
#   ARGV[1] how many to move
# -> how many are left on the list.
_MOVE = """
local rows = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #rows == 0 then return 0 end
local moved = tonumber(redis.call('GET', KEYS[3]) or '0')
for i, raw in ipairs(rows) do redis.call('HSET', KEYS[2], moved + i, raw) end
redis.call('LTRIM', KEYS[1], #rows, -1)
redis.call('SET', KEYS[3], moved + #rows)
return redis.call('LLEN', KEYS[1])
"""


BY_SEQ_NAME = "audit log: entries by seq (export --incident reads each in O(1))"


async def plan_by_seq(r: Redis) -> list[str]:
    n = int(await r.llen(Keys.AUDIT_LOG))
    return [f"{n} audit entries to move from the list to the entries-by-seq hash"] if n else []


async def apply_by_seq(r: Redis) -> int:
    move = script(r, _MOVE)
    moved = 0
    before = int(await r.llen(Keys.AUDIT_LOG))
    left = before
    while left:
        left = int(await move(keys=[Keys.AUDIT_LOG, Keys.AUDIT_ENTRIES, Keys.AUDIT_LOG_MOVED], args=[BATCH]))
        moved = max(moved, before - left)
    return moved
