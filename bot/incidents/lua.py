"""Lua for the incident state transitions that must be atomic.

Kept apart from the Python that calls them (store.py) so each script can be read whole; the
result codes are store.py's enums.
All keys of one incident share its hash tag, so these run on Redis Cluster.
"""

# Role assignment body, shared by ROLE_SET and HANDOFF_ACCEPT.
# KEYS: roles, tenure. Locals expected: role, user, by, now.
_ROLE_SET_BODY = """
local old = redis.call('HGET', KEYS_ROLES, role)
if old then
  local o = cjson.decode(old)
  if o.user == user then return 0 end
  redis.call('RPUSH', KEYS_TENURE, cjson.encode({role=role, user=o.user, event='renounced', at=now, by=by}))
end
redis.call('HSET', KEYS_ROLES, role, cjson.encode({user=user, since=now, by=by}))
redis.call('RPUSH', KEYS_TENURE, cjson.encode({role=role, user=user, event='assumed', at=now, by=by}))
return 1
"""

# KEYS: roles, tenure. ARGV: role, user, by, now. -> 1 changed, 0 already held.
ROLE_SET = (
    "local KEYS_ROLES, KEYS_TENURE = KEYS[1], KEYS[2]\n"
    "local role, user, by, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])\n" + _ROLE_SET_BODY
)

# KEYS: incident. ARGV: new_sev, reason, now, first_update_sev1..4, interval_sev1..4 (seconds; '' = leave
# the due alone).
# -> {code, old_sev}; code 1 raised, 0 same, -1 lower refused, -2 resolved, -3 missing.
# While active, a raise pulls the next update in when the new SEV's cadence is shorter (never
# pushes it out): due = min(current, max(anchor, now)), anchor = last update + interval, or
# declared + first update. Not active: nothing is due, and a raise does not make it so.
SEV_RAISE = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, 0} end
local cur = tonumber(redis.call('HGET', KEYS[1], 'sev'))
if st == 'resolved' then return {-2, cur} end
local new = tonumber(ARGV[1])
if new == cur then return {0, cur} end
if new > cur then return {-1, cur} end
redis.call('HSET', KEYS[1], 'sev', new, 'sev_reason', ARGV[2], 'updated_at', ARGV[3])
if st == 'active' and ARGV[4] ~= '' then
  local now = tonumber(ARGV[3])
  local last = tonumber(redis.call('HGET', KEYS[1], 'last_update_at') or '')
  local anchor
  if last then
    anchor = last + tonumber(ARGV[7 + new])
  else
    anchor = tonumber(redis.call('HGET', KEYS[1], 'declared_at')) + tonumber(ARGV[3 + new])
  end
  local due = tonumber(redis.call('HGET', KEYS[1], 'next_update_due') or '')
  local cand = math.max(anchor, now)
  if not due or cand < due then
    redis.call('HSET', KEYS[1], 'next_update_due', tostring(cand))
  end
end
return {1, cur}
"""

# KEYS: incident, sev-lowered log. ARGV: new_sev, reason, by, now (repr).
# -> {code, old_sev}; code 1 lowered, 0 same, -1 not lower (a raise: SEV only goes down here),
# -2 still open (SEV never goes down during an incident), -3 missing.
# The postmortem's `postmortem sev` is the only caller: the one way a SEV goes down, after resolve.
# Each lowering is kept on the incident's own log (JSON built here from the strings: cjson would
# round the time).
SEV_LOWER = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, 0} end
local cur = tonumber(redis.call('HGET', KEYS[1], 'sev'))
if st ~= 'resolved' then return {-2, cur} end
local new = tonumber(ARGV[1])
if new == cur then return {0, cur} end
if new < cur then return {-1, cur} end
redis.call('HSET', KEYS[1], 'sev', new, 'sev_reason', ARGV[2], 'updated_at', ARGV[4])
redis.call('RPUSH', KEYS[2], '{"from":' .. cur .. ',"to":' .. new .. ',"reason":' .. cjson.encode(ARGV[2])
  .. ',"by":' .. cjson.encode(ARGV[3]) .. ',"at":' .. ARGV[4] .. '}')
return {1, cur}
"""

# KEYS: incident. ARGV: new_status, now. -> {code, old_status}
# code 1 changed, 0 already there, -1 not allowed from here, -3 missing.
STATUS_SET = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {-3, ''} end
local new = ARGV[1]
if st == new then return {0, st} end
local rank = {active=0, mitigated=1, resolved=2}
if rank[new] < rank[st] then return {-1, st} end
redis.call('HSET', KEYS[1], 'status', new, new .. '_at', ARGV[2], 'updated_at', ARGV[2])
if new == 'mitigated' or new == 'resolved' then
  -- Reminders stop once the incident is mitigated; nothing is due any more.
  redis.call('HDEL', KEYS[1], 'next_update_due')
end
return {1, st}
"""

# KEYS: handoff, roles, tenure, incident. ARGV: clicker, now.
# -> {code, role, detail}; 1 accepted, -1 not the receiver, -2 not pending (detail: its status),
# -3 missing, -4 incident resolved, -5 superseded: the role changed hands since the handoff
# was posted (detail: who holds it now, '' when nobody), so accepting would take it from them.
HANDOFF_ACCEPT = (
    """
local h = redis.call('HGET', KEYS[1], 'doc')
if not h then return {-3, '', ''} end
local d = cjson.decode(h)
if d.status ~= 'pending' then return {-2, d.role, d.status} end
if d.to_user ~= ARGV[1] then return {-1, d.role, ''} end
if redis.call('HGET', KEYS[4], 'status') == 'resolved' then return {-4, d.role, ''} end
local held = redis.call('HGET', KEYS[2], d.role)
local now_user = ''
if held then now_user = cjson.decode(held).user end
local from_user = d.from_user
if type(from_user) ~= 'string' then from_user = '' end
if now_user ~= from_user then
  d.status = 'superseded'
  redis.call('HSET', KEYS[1], 'doc', cjson.encode(d))
  return {-5, d.role, now_user}
end
d.status = 'accepted'
d.accepted_at = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'doc', cjson.encode(d))
local KEYS_ROLES, KEYS_TENURE = KEYS[2], KEYS[3]
local role, user, by, now = d.role, d.to_user, ARGV[1], tonumber(ARGV[2])
local function set_role()
"""
    + _ROLE_SET_BODY
    + """
end
set_role()
return {1, d.role, ''}
"""
)

# KEYS: handoff. -> 1 marked failed, 0 no longer pending (accepted meanwhile) or missing.
# A handoff whose message never reached the channel must not stay pending (nudges, a stray Accept).
HANDOFF_FAIL = """
local h = redis.call('HGET', KEYS[1], 'doc')
if not h then return 0 end
local d = cjson.decode(h)
if d.status ~= 'pending' then return 0 end
d.status = 'failed'
redis.call('HSET', KEYS[1], 'doc', cjson.encode(d))
return 1
"""

# KEYS: handoff. ARGV: message_ts. Records where the handoff message is, and nothing else: an
# Accept that landed while the message was being posted is kept. -> the handoff's status ('' missing).
HANDOFF_POSTED = """
local h = redis.call('HGET', KEYS[1], 'doc')
if not h then return '' end
local d = cjson.decode(h)
d.message_ts = ARGV[1]
redis.call('HSET', KEYS[1], 'doc', cjson.encode(d))
return d.status
"""

# KEYS: roles, tenure. ARGV: role, user, now, expected holder ('' = nobody). Take a seat only while
# the expected person holds it: an empty IC seat, or one held by someone found not IC-eligible (the
# check was made before this runs; a seat that moved since is not taken from its new holder).
# -> {1, ''} taken, {0, holder} someone else holds it ('' when it is empty now).
SEAT_TAKE = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
local holder = old and cjson.decode(old).user or ''
if holder ~= ARGV[4] then return {0, holder} end
local now = tonumber(ARGV[3])
if old then
  redis.call('RPUSH', KEYS[2], cjson.encode({role=ARGV[1], user=holder, event='renounced', at=now, by=ARGV[2]}))
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({user=ARGV[2], since=now, by=ARGV[2]}))
redis.call('RPUSH', KEYS[2], cjson.encode({role=ARGV[1], user=ARGV[2], event='assumed', at=now, by=ARGV[2]}))
return {1, ''}
"""

# KEYS: incident hash. ARGV: cell. -> 1 added, 0 already in scope, -2 resolved, -3 missing.
# The cells are a JSON list (never empty after an add, so cjson's {} for an empty table never shows).
SCOPE_ADD = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return -3 end
if st == 'resolved' then return -2 end
local raw = redis.call('HGET', KEYS[1], 'cells')
local cells = {}
if raw and raw ~= '' and raw ~= '[]' and raw ~= '{}' then cells = cjson.decode(raw) end
for _, c in ipairs(cells) do if c == ARGV[1] then return 0 end end
cells[#cells + 1] = ARGV[1]
redis.call('HSET', KEYS[1], 'cells', cjson.encode(cells))
return 1
"""
