"""Lua for the alert groups: one hash per group (a cell's pages, or "security:<cell>"), holding
the incident the group feeds and a lock held while one delivery's part is handled.

Kept apart from the Python that calls them (store.py); the result codes are store.py's enums.
Every key is one group's hash, so each script touches one slot (Redis Cluster).

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
