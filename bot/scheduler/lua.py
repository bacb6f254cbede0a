"""Lua for the scheduler. All keys share the {sched} hash tag (one slot).

Layout: ``due`` zset member "kind|key" -> due time; ``jobs`` hash member -> job
JSON; ``lease`` zset token -> lease deadline; ``inflight`` hash token -> job
JSON; ``members`` zset of the pending members, all at score 0, so ZLEXCOUNT
counts one kind's pending jobs in O(log n) (``Scheduler.pending_count``). A
claim moves a job from due/jobs to lease/inflight in one script, so exactly one
claimer gets it; ``ack`` ends it, ``release`` hands it back at once (a replica
shutting down). A lease that runs out (the claimer died) is handed out again,
marked with a higher attempt.
"""

# KEYS: due, jobs, members. ARGV: member, due, job_json. Upsert: one pending job per member.
SCHEDULE = """
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
return 1
"""

# KEYS: due, jobs, members. ARGV: member.
CANCEL = """
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

# KEYS: due, jobs, lease, inflight, dead, members. ARGV: now, lease_until, limit, max_attempts.
# -> {claimed, dead}: job JSON (each with token and attempt set) to run, and jobs given up on
# now (moved to the dead hash) for the caller to log and audit.
CLAIM = """
local now, lease_until, limit, max_att = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local out, dead = {}, {}
for _, token in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)) do
  local raw = redis.call('HGET', KEYS[4], token)
  if raw then
    local j = cjson.decode(raw)
    j.attempt = (j.attempt or 1) + 1
    if j.attempt > max_att then
      redis.call('HDEL', KEYS[4], token)
      redis.call('ZREM', KEYS[3], token)
      raw = cjson.encode(j)
      redis.call('HSET', KEYS[5], token, raw)
      dead[#dead + 1] = raw
    else
      raw = cjson.encode(j)
      redis.call('HSET', KEYS[4], token, raw)
      redis.call('ZADD', KEYS[3], lease_until, token)
      out[#out + 1] = raw
    end
  else
    redis.call('ZREM', KEYS[3], token)
  end
end
local room = limit - #out
if room <= 0 then return {out, dead} end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, room)) do
  redis.call('ZREM', KEYS[1], member)
  redis.call('ZREM', KEYS[6], member)
  local raw = redis.call('HGET', KEYS[2], member)
  redis.call('HDEL', KEYS[2], member)
  if raw then
    local j = cjson.decode(raw)
    redis.call('HSET', KEYS[4], j.token, raw)
    redis.call('ZADD', KEYS[3], lease_until, j.token)
    out[#out + 1] = raw
  end
end
return {out, dead}
"""

# KEYS: lease, inflight. ARGV: token.
ACK = """
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
"""

# KEYS: due, jobs, lease, inflight, members. ARGV: token, attempt (as claimed).
# Hands a claimed job whose handler never started back as pending at its own due, attempt
# unchanged, so any replica claims it at its next tick instead of after the lease. -> 1 handed
# back; 2 dropped, because the same kind|key was scheduled again since (the newer job stands, as
# with any reschedule); 0 not ours any more (the lease ran out and another replica holds it).
RELEASE = """
local raw = redis.call('HGET', KEYS[4], ARGV[1])
if not raw then return 0 end
local j = cjson.decode(raw)
if tostring(j.attempt or 1) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local member = j.kind .. '|' .. j.key
if redis.call('HEXISTS', KEYS[2], member) == 1 then return 2 end
redis.call('HSET', KEYS[2], member, raw)
redis.call('ZADD', KEYS[1], j.due, member)
redis.call('ZADD', KEYS[5], 0, member)
return 1
"""
