"""Lua for the alert groups: one hash per group (a cell's pages, or "security:<cell>"), holding
the incident the group feeds and a lock held while one delivery's part is handled; and for the
alerts an incident records (ALERTS_RECORD, at the end).

Kept apart from the Python that calls them (store.py); the result codes are store.py's enums.
Every group script's key is one group's hash, and ALERTS_RECORD's keys share their incident's hash
tag, so each script touches one slot (Redis Cluster).

Fields: ``inc`` the incident the group feeds; ``last`` the one it fed before (resolved);
``number`` an incident number taken for an incident being opened (saved or not yet);
``lock`` / ``lock_until`` the holder's token and until when (the app clock's seconds).
"""

# KEYS: group. ARGV: token, now, until.
# -> {1, inc, number, last} locked (also when the token already held it); {0, holder's until} busy.
LOCK = """
local holder = redis.call('HGET', KEYS[1], 'lock')
local untl = tonumber(redis.call('HGET', KEYS[1], 'lock_until') or '0')
if holder and holder ~= ARGV[1] and untl > tonumber(ARGV[2]) then return {0, tostring(untl), '', ''} end
redis.call('HSET', KEYS[1], 'lock', ARGV[1], 'lock_until', ARGV[3])
local f = redis.call('HMGET', KEYS[1], 'inc', 'number', 'last')
return {1, f[1] or '', f[2] or '', f[3] or ''}
"""

# KEYS: group. ARGV: token. Release the lock if it is still ours. -> 1 released, 0 not ours.
UNLOCK = """
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'lock', 'lock_until')
return 1
"""

# KEYS: group. ARGV: token, number. Note the number of the incident being opened. -> 1, or 0 lost the lock.
RESERVE = """
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'number', ARGV[2])
return 1
"""

# KEYS: group. ARGV: token, incident. The group feeds this incident from now on. -> 1, or 0 lost the lock.
BIND = """
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'inc', ARGV[2])
redis.call('HDEL', KEYS[1], 'number')
return 1
"""

# KEYS: group. ARGV: token, incident. The incident is resolved (or gone): the group feeds none, and
# remembers it as the last. -> 1, or 0 lost the lock or the group feeds another incident already.
UNBIND = """
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'inc') ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'inc')
redis.call('HSET', KEYS[1], 'last', ARGV[2])
return 1
"""

# KEYS: incident, alerts (fingerprint -> record JSON), delivery (this delivery's result).
# ARGV: received_at, keep_seconds, then one record JSON per alert (status firing|resolved).
# Each fingerprint is a little state machine: firing counts when it is new or was resolved,
# resolved counts when it is new or was firing; the same status again changes nothing (so a
# redelivery, or Alertmanager's partial-then-full group, adds nothing). A firing alert moves
# detected_at back to its arrival when that is earlier. The result is kept per delivery, so a
# retried delivery gets the same answer (and posts the same summary once) instead of "nothing new".
# -> {code, result}; code 1 recorded, 2 this delivery was recorded before (result as then),
# -2 resolved, -3 missing. result: JSON {fired = [i…], cleared = [i…]}, 1-based ARGV positions after
# the first two ({} when empty: cjson cannot tell an empty list from an empty object).
ALERTS_RECORD = """
local done = redis.call('GET', KEYS[3])
if done then return {2, done} end
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, ''} end
if st == 'resolved' then return {-2, ''} end
local received = tonumber(ARGV[1])
local fired, cleared = {}, {}
for i = 3, #ARGV do
  local a = cjson.decode(ARGV[i])
  local raw = redis.call('HGET', KEYS[2], a.fingerprint)
  local old = raw and cjson.decode(raw)
  if a.status == 'firing' then
    if not old or old.status ~= 'firing' then
      redis.call('HSET', KEYS[2], a.fingerprint, ARGV[i])
      fired[#fired + 1] = i - 2
    end
  elseif not old then
    a.resolved_at = received
    redis.call('HSET', KEYS[2], a.fingerprint, cjson.encode(a))
    cleared[#cleared + 1] = i - 2
  elseif old.status == 'firing' then
    old.status, old.ends_at, old.resolved_at = 'resolved', a.ends_at, received
    redis.call('HSET', KEYS[2], a.fingerprint, cjson.encode(old))
    cleared[#cleared + 1] = i - 2
  end
end
if #fired > 0 then
  local det = tonumber(redis.call('HGET', KEYS[1], 'detected_at') or '')
  if not det or received < det then redis.call('HSET', KEYS[1], 'detected_at', ARGV[1]) end
end
local result = cjson.encode({fired = fired, cleared = cleared})
redis.call('SET', KEYS[3], result, 'EX', ARGV[2])
return {1, result}
"""
