"""Lua for the lever state that must change atomically: request transitions and the node-quarantine
budgets.

Kept apart from the Python that calls them (store.py) so each script can be read whole; the
result codes are store.py's enums. Every key is under the `{levers}` hash tag (bot.store.Keys.levers),
so these run on Redis Cluster.
"""

# KEYS: request hash, in-flight set, moved index. ARGV: n, from_state_1..n, to_state, then field/value pairs.
# -> 1 moved (Moved.MOVED), 0 missing or not in a from state (Moved.NOT_FROM).
# `executing` and `undoing` keep the request in the in-flight set, every other state takes it out.
# The moved index scores the request by its latest timestamp field, so `changed` reads the requests
# that moved in its window without walking every open incident.
TRANSITION = """
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return 0 end
local n = tonumber(ARGV[1])
local ok = false
for i = 2, n + 1 do if ARGV[i] == cur then ok = true end end
if not ok then return 0 end
local to = ARGV[n + 2]
redis.call('HSET', KEYS[1], 'state', to)
for i = n + 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local id = string.match(KEYS[1], 'req:(.*)$')
if to == 'executing' or to == 'undoing' then redis.call('SADD', KEYS[2], id) else redis.call('SREM', KEYS[2], id) end
local last = nil
for _, f in ipairs({'created_at', 'approved_at', 'started_at', 'finished_at', 'undone_at'}) do
  local t = tonumber(redis.call('HGET', KEYS[1], f))
  if t and (not last or t > last) then last = t end
end
if last then redis.call('ZADD', KEYS[3], last, id) end
return 1
"""

# KEYS: rate zset, floor zset, floor owners hash (node -> request).
# ARGV: now, rate limit, window, request, node, total GPU nodes, max fraction, listed_at, override (1/0),
#       then the nodes the API listing showed quarantined.
# -> {1} reserved (Reserved.OK) | {-1, used} over the rate (Reserved.RATE)
#    | {-2, quarantined before, after, total} under the floor (Reserved.FLOOR)
RESERVE = """
local now, req, node = tonumber(ARGV[1]), ARGV[4], ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
if not redis.call('ZSCORE', KEYS[1], req) then
  local used = redis.call('ZCARD', KEYS[1])
  if used >= tonumber(ARGV[2]) then return {-1, used} end
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
  return {-2, count, after, total}
end
redis.call('ZADD', KEYS[1], now, req)
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) * 2)
redis.call('ZADD', KEYS[2], '+inf', node)
redis.call('HSET', KEYS[3], node, req)
return {1}
"""

# KEYS: floor zset, owners hash. ARGV: node, request, 'landed' (score = ARGV[4], now) | 'free'.
# Only the owner moves it. -> 1 moved (FloorMoved.MOVED), 0 not the owner (FloorMoved.NOT_OWNER).
FLOOR = """
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == 'free' then
  redis.call('ZREM', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], 'XX', ARGV[4], ARGV[1])
end
return 1
"""
