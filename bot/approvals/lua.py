"""Lua for ballots: every decision is one atomic script on the incident's slot.

A ballot is a hash; its votes are a set beside it (one SADD per person). The
incident's roles hash and SEV are read inside the same script, so "holds the
role now", "has not voted", "is not the requester", "not expired" and the
vote itself happen as one step, whatever the number of clicks or processes.
Times come from the caller's clock (ARGV) so an injected clock governs them.
Each script's result codes are an enum in store.py: handlers compare those, never these strings.
"""

# KEYS: ballot, index. ARGV: id, then field/value pairs. -> 1 created, 0 existed.
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

# KEYS: ballot, votes, roles, incident. ARGV: voter, now, 'approve'|'deny', the seats the voter
# is eligible for (json; "" for any): a held seat not among them is not the voter's to fill, then
# the channel and ts of the message the button was pressed on: a vote counts only from the card
# posted for the ballot (set_card), never from a copy of it or from another message.
# -> {code, a, b}:
#   missing | elsewhere(card channel) | decided(state) | expired (this call expired it) | self | voted
#   | norole(required seats json) | filled(seat, by) | recorded(seat, missing seats json)
#   | approved(seat) | denied(seat)
VOTE = """
local b = redis.call('HMGET', KEYS[1], 'state', 'requester', 'expires_at', 'seats', 'sev1_seats',
                     'filled', 'grant_seconds', 'card_channel', 'card_ts')
if not b[1] then return {'missing', '', ''} end
if not b[8] or not b[9] or b[8] ~= ARGV[5] or b[9] ~= ARGV[6] then return {'elsewhere', b[8] or '', ''} end
local voter, now, choice = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if b[1] ~= 'pending' then return {'decided', b[1], ''} end
if now >= tonumber(b[3]) then
  redis.call('HSET', KEYS[1], 'state', 'expired', 'decided_by', 'system', 'decided_at', ARGV[2])
  return {'expired', '', ''}
end
if voter == b[2] then return {'self', '', ''} end
if redis.call('SISMEMBER', KEYS[2], voter) == 1 then return {'voted', '', ''} end
local seats = cjson.decode(b[4])
if tonumber(redis.call('HGET', KEYS[4], 'sev')) == 1 then
  for _, s in ipairs(cjson.decode(b[5])) do
    local dup = false
    for _, t in ipairs(seats) do if t == s then dup = true end end
    if not dup then table.insert(seats, s) end
  end
end
-- Only the seats the caller's eligibility check allowed: no list fills no seat (fail closed).
local allowed = {}
if ARGV[4] and ARGV[4] ~= '' then
  for _, s in ipairs(cjson.decode(ARGV[4])) do allowed[s] = true end
end
local held = {}
for _, s in ipairs(seats) do
  local h = redis.call('HGET', KEYS[3], s)
  if h and cjson.decode(h).user == voter and allowed[s] then table.insert(held, s) end
end
if #held == 0 then return {'norole', cjson.encode(seats), ''} end
if choice == 'deny' then
  redis.call('SADD', KEYS[2], voter)
  redis.call('HSET', KEYS[1], 'state', 'denied', 'decided_by', voter, 'decided_at', ARGV[2])
  return {'denied', held[1], ''}
end
local filled = cjson.decode(b[6])
local seat = nil
for _, s in ipairs(held) do
  if not filled[s] then seat = s; break end
end
if not seat then return {'filled', held[1], filled[held[1]]} end
redis.call('SADD', KEYS[2], voter)
filled[seat] = voter
redis.call('HSET', KEYS[1], 'filled', cjson.encode(filled))
local missing = {}
for _, s in ipairs(seats) do
  if not filled[s] then table.insert(missing, s) end
end
if #missing > 0 then return {'recorded', seat, cjson.encode(missing)} end
redis.call('HSET', KEYS[1], 'state', 'approved', 'decided_by', voter, 'decided_at', ARGV[2])
local grant = tonumber(b[7] or '0')
if grant and grant > 0 then
  redis.call('HSET', KEYS[1], 'grant_expires_at', tostring(now + grant))
end
return {'approved', seat, ''}
"""

# KEYS: ballot. ARGV: now. -> 1 this call expired it, 0 not pending or not yet due, -1 missing.
EXPIRE = """
local b = redis.call('HMGET', KEYS[1], 'state', 'expires_at')
if not b[1] then return -1 end
if b[1] ~= 'pending' or tonumber(ARGV[1]) < tonumber(b[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'expired', 'decided_by', 'system', 'decided_at', ARGV[1])
return 1
"""

# KEYS: ballot. ARGV: now. -> 1 this call ended the grant, 0 not active or not yet due, -1 missing.
END_GRANT = """
local b = redis.call('HMGET', KEYS[1], 'state', 'grant_expires_at')
if not b[1] then return -1 end
if b[1] ~= 'approved' or not b[2] or tonumber(ARGV[1]) < tonumber(b[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'ended', 'ended_at', ARGV[1], 'ended_by', 'system')
return 1
"""

# KEYS: ballot, roles. ARGV: actor, now, revoker roles json.
# -> {code, state}: revoked | missing | notlive(state) | notallowed
# The grantee may give a grant back; holders of the revoker roles may take it away.
REVOKE = """
local b = redis.call('HMGET', KEYS[1], 'state', 'requester', 'grant_expires_at')
if not b[1] then return {'missing', ''} end
local live = b[1] == 'pending' or (b[1] == 'approved' and tonumber(ARGV[2]) < tonumber(b[3] or '0'))
if not live then return {'notlive', b[1]} end
local ok = ARGV[1] == b[2]
for _, r in ipairs(cjson.decode(ARGV[3])) do
  local h = redis.call('HGET', KEYS[2], r)
  if h and cjson.decode(h).user == ARGV[1] then ok = true end
end
if not ok then return {'notallowed', b[1]} end
redis.call('HSET', KEYS[1], 'state', 'revoked', 'ended_at', ARGV[2], 'ended_by', ARGV[1])
return {'revoked', b[1]}
"""

# KEYS: ballot. ARGV: channel, ts. Remembers where the card is (only once).
SET_CARD = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'card_ts') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'card_channel', ARGV[1], 'card_ts', ARGV[2])
return 1
"""

# KEYS: ballot. ARGV: now, actor. The incident was resolved: a pending request expires, an
# active grant ends. -> 'expired' | 'ended' | '' (already decided, or a lever past its vote).
CLOSE = """
local b = redis.call('HMGET', KEYS[1], 'state', 'kind', 'grant_expires_at')
if b[1] == 'pending' then
  redis.call('HSET', KEYS[1], 'state', 'expired', 'decided_by', ARGV[2], 'decided_at', ARGV[1])
  return 'expired'
end
if b[1] == 'approved' and b[2] == 'breakglass' and tonumber(ARGV[1]) < tonumber(b[3] or '0') then
  redis.call('HSET', KEYS[1], 'state', 'ended', 'ended_at', ARGV[1], 'ended_by', ARGV[2])
  return 'ended'
end
return ''
"""
