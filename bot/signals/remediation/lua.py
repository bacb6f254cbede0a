"""Lua for the remediation alarm: one cell's watch, four keys in the cell's slot.

Kept apart from the Python that calls them (store.py); the result codes are store.py's enums.

Keys: ``state`` (hash) `watched` 1 once a first listing was seen, `last_event` when a node last
went out, `seq` the last burst's number, and the current burst's `burst` (0: none), `burst_at`,
`count`, `reason`, `repeats`, `more` (nodes out since the alarm), `posted`, `claim_until` (who
posts it holds this), `number` / `incident` (the incident it goes to); ``out`` (set) the nodes
out at the last listing; ``last`` (hash) node -> when it last went out; ``events`` (sorted set)
"<node>|<time>" scored by the time, the last hour's.
"""

# KEYS: state, out, last, events. ARGV: now, window_s, per_window, same_node_s, quiet_s, keep_s,
# claim_until, nodes (JSON [[name, since], ...]: since is when the cluster says it went out, -1 unknown).
# A node counts when it is out now and was not at the last listing. At the first listing of a cell
# there is no "before": a node counts only if the cluster's own time says it went out in the window.
# -> {code, count in the window, burst, more, repeats (JSON), reason}; code: store.Observed.
OBSERVE = """
local now = tonumber(ARGV[1])
local window, per, same, quiet = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local nodes = cjson.decode(ARGV[8])
local first = redis.call('HGET', KEYS[1], 'watched') ~= '1'
local new, repeats = {}, {}
for _, n in ipairs(nodes) do
  local name, since = n[1], tonumber(n[2])
  if redis.call('SISMEMBER', KEYS[2], name) == 0 then
    local t = now
    if first then
      if since < 0 or since < now - window then t = nil elseif since < now then t = since end
    end
    if t then new[#new + 1] = {name, t} end
  end
end
redis.call('DEL', KEYS[2])
for _, n in ipairs(nodes) do redis.call('SADD', KEYS[2], n[1]) end
redis.call('HSET', KEYS[1], 'watched', '1')
for _, e in ipairs(new) do
  local before = tonumber(redis.call('HGET', KEYS[3], e[1]) or '')
  if before and e[2] > before and e[2] - before <= same then repeats[#repeats + 1] = e[1] end
  redis.call('HSET', KEYS[3], e[1], tostring(e[2]))
  redis.call('ZADD', KEYS[4], e[2], e[1] .. '|' .. tostring(e[2]))
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. tostring(now - window))
local count = redis.call('ZCOUNT', KEYS[4], tostring(now - window), '+inf')
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[6]) end
if #new == 0 then return {0, count, 0, 0, '[]', ''} end
local prev = tonumber(redis.call('HGET', KEYS[1], 'last_event') or '')
redis.call('HSET', KEYS[1], 'last_event', tostring(now))
local burst = tonumber(redis.call('HGET', KEYS[1], 'burst') or '0')
if burst > 0 then
  if prev and now - prev < quiet then
    local more = redis.call('HINCRBY', KEYS[1], 'more', #new)
    return {3, count, burst, more, '[]', ''}
  end
  redis.call('HSET', KEYS[1], 'burst', '0')
end
if count <= per and #repeats == 0 then return {1, count, 0, 0, '[]', ''} end
local id = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local reason = count > per and 'rate' or 'repeat'
local rep = #repeats > 0 and cjson.encode(repeats) or '[]'
redis.call('HSET', KEYS[1], 'burst', id, 'burst_at', tostring(now), 'count', count, 'reason', reason,
  'repeats', rep, 'more', 0, 'posted', 0, 'claim_until', ARGV[7])
redis.call('HDEL', KEYS[1], 'number', 'incident')
return {2, count, id, 0, rep, reason}
"""

# KEYS: state. ARGV: now, claim_until. Take the current burst's unposted alarm to post it.
# -> {1, burst, burst_at, count, reason, repeats, more, number, incident} taken; {0} none to post
# (none, posted, or another process holds it until its claim runs out).
CLAIM = """
local f = redis.call('HMGET', KEYS[1], 'burst', 'posted', 'claim_until', 'burst_at', 'count', 'reason',
  'repeats', 'more', 'number', 'incident')
if not f[1] or f[1] == '0' or f[2] ~= '0' then return {0} end
if tonumber(f[3] or '0') > tonumber(ARGV[1]) then return {0} end
redis.call('HSET', KEYS[1], 'claim_until', ARGV[2])
return {1, f[1], f[4], f[5], f[6], f[7], f[8], f[9] or '', f[10] or ''}
"""

# KEYS: state. ARGV: burst, field, value. Note the incident number taken (`number`) or the incident
# the alarm goes to (`incident`), for the burst still current. -> 1, or 0 (another burst by now).
NOTE = """
if redis.call('HGET', KEYS[1], 'burst') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return 1
"""

# KEYS: state. ARGV: burst. The alarm is in the channel. -> 1, or 0 (another burst by now).
POSTED = """
if redis.call('HGET', KEYS[1], 'burst') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'posted', 1, 'claim_until', 0)
return 1
"""

# KEYS: state. ARGV: burst. Posting failed: let the next poll take it at once. -> 1, or 0.
RELEASE = """
if redis.call('HGET', KEYS[1], 'burst') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'claim_until', 0)
return 1
"""
