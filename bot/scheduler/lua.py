"""Lua for the scheduler. All keys share the {sched} hash tag (one slot).

Layout: ``due`` zset member "kind|key" -> due time; ``jobs`` hash member -> job
JSON; ``lease`` zset token -> lease deadline; ``inflight`` hash token -> job
JSON. A claim moves a job from due/jobs to lease/inflight in one script, so
exactly one claimer gets it; ``ack`` ends it. A lease that runs out (the
claimer died) is handed out again, marked with a higher attempt.
"""

# KEYS: due, jobs. ARGV: member, due, job_json. Upsert: one pending job per member.
SCHEDULE = """
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""

# KEYS: due, jobs. ARGV: member.
CANCEL = """
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

# KEYS: due, jobs, lease, inflight, dead. ARGV: now, lease_until, limit, max_attempts.
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
