"""Lua for the postmortem's writes (facts and action items) that must be atomic.

Kept apart from the Python that calls them (store.py); the result codes are store.py's enums.
Every script's keys belong to one incident and share its hash tag, so these run on Redis Cluster.
"""

# KEYS: incident, facts. ARGV: field, value, field, value, … (a value '' deletes the field).
# -> {code, previous value of each field in order ('' when none)}; code 1 set, -3 no such incident.
# Each fact is overwritten whole; the previous values go into the audit entry of the command.
FACTS_SET = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-3} end
local out = {1}
for i = 1, #ARGV, 2 do
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or ''
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
return out
"""

# KEYS: incident, actions (item id -> item JSON). ARGV: item id, item JSON.
# -> 1 added, 0 that id exists already (nothing changed), -3 no such incident.
ACTION_ADD = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -3 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
return 1
"""

# An item is three fields of the actions hash: "<id>" (the item as added, never rewritten),
# "<id>|done" (who closed it, when, with what evidence) and "<id>|reminded" (when each reminder
# was posted, space-separated). No script decodes and re-encodes JSON: cjson would round the times.

# KEYS: actions. ARGV: item id, the closing JSON ({evidence, by, at}).
# -> {code, closing JSON as it is now ('' when missing)}; code 1 closed, 0 it was done already
# (closed only once: the first evidence stands), -3 no such item.
ACTION_DONE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-3, ''} end
local f = ARGV[1] .. '|done'
local was = redis.call('HGET', KEYS[1], f)
if was then return {0, was} end
redis.call('HSET', KEYS[1], f, ARGV[2])
return {1, ARGV[2]}
"""

# KEYS: actions. ARGV: item id, when the reminder was posted (repr of a float). Records a reminder
# that was posted (run without a deadline: it only brings Redis up to date with the channel).
# -> 1 recorded, 0 the item is missing.
ACTION_REMINDED = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local f = ARGV[1] .. '|reminded'
local was = redis.call('HGET', KEYS[1], f)
if was then
  redis.call('HSET', KEYS[1], f, was .. ' ' .. ARGV[2])
else
  redis.call('HSET', KEYS[1], f, ARGV[2])
end
return 1
"""
