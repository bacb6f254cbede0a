"""Lua for comms: recording an update, the cadence sync mark, snooze, and the two-step dedupe marks.

Kept apart from the Python that calls them (store.py) so each script can be read whole; the
result codes are store.py's enums. Keys of one incident share its hash tag.
"""

# KEYS: incident, comms:cadence.
# The due a reminder should be scheduled for ("" = none: mitigated, resolved, missing),
# recorded as synced so the same due is not rescheduled after every request.
# -> {changed (1/0), target, previous}
SYNC_MARK = """
local st = redis.call('HGET', KEYS[1], 'status')
local due = redis.call('HGET', KEYS[1], 'next_update_due') or ''
local target = ''
if st == 'active' then target = due end
local prev = redis.call('HGET', KEYS[2], 'synced') or ''
if prev == target then return {0, target, prev} end
redis.call('HSET', KEYS[2], 'synced', target)
return {1, target, prev}
"""

# KEYS: incident. ARGV: expected_due, new_due.
# Compare-and-set: only the reminder being answered can be snoozed, once.
# -> {code, current_due}; 1 snoozed, 0 the due moved meanwhile, -2 not active, -3 missing.
SNOOZE = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, ''} end
if st ~= 'active' then return {-2, ''} end
local due = redis.call('HGET', KEYS[1], 'next_update_due') or ''
if tonumber(due) == nil or math.abs(tonumber(due) - tonumber(ARGV[1])) > 0.001 then return {0, due} end
redis.call('HSET', KEYS[1], 'next_update_due', ARGV[2])
return {1, ARGV[2]}
"""

# Dedupe marks for a side effect (a reminder, an escalation, a nudge, a flagged event), in two
# steps so a crash between the mark and the post cannot lose the post: "pending:<until>" while
# one process posts, "done" after the post landed. A pending mark past its time (the process
# died; the scheduler redelivers after its lease) can be claimed again. Times are the app clock's.
# KEYS: mark. ARGV: now, pending_until, keep_seconds.
# -> {1, ''} claimed, {0, ''} done or being posted, {2, until} claimed over an expired claim that
#    held until `until`: its claimer died mid-post, and its post may have landed (comms/system.py).
MARK_CLAIM = """
local v = redis.call('GET', KEYS[1])
local expired = ''
if v then
  local pending = string.match(v, '^pending:(.+)$')
  -- Anything that is not a pending mark ("done", or "1" from before marks had two steps) is done.
  if not pending or tonumber(pending) > tonumber(ARGV[1]) then return {0, ''} end
  expired = pending
end
redis.call('SET', KEYS[1], 'pending:' .. ARGV[2], 'EX', ARGV[3])
if expired ~= '' then return {2, expired} end
return {1, ''}
"""

# KEYS: mark. ARGV: pending value to release. Release only our own claim (the post failed).
MARK_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: mark. ARGV: pending value of our claim, keep_seconds. Mark done only while the claim is still
# ours: a claim that ran out and was taken by another process is theirs to finish. -> 1 done, 0 not ours.
MARK_DONE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], 'done', 'EX', ARGV[2])
  return 1
end
return 0
"""

# KEYS: incident. ARGV: now, text, interval_sev1..4 (seconds). Records the update on the incident's
# hash and, while it is active, moves its next update due from the stored SEV.
# -> {code, next_due}; code 1 recorded, -2 resolved, -3 missing.
UPDATE_RECORD = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, ''} end
if st == 'resolved' then return {-2, ''} end
local sev = tonumber(redis.call('HGET', KEYS[1], 'sev'))
local now = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'last_update_at', ARGV[1], 'last_update_text', ARGV[2])
if st == 'active' then
  local due = now + tonumber(ARGV[2 + sev])
  redis.call('HSET', KEYS[1], 'next_update_due', tostring(due))
  return {1, tostring(due)}
end
return {1, ''}
"""
