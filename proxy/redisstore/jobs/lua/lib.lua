-- lib.lua: helpers shared by the replay-job scripts (lua/*.lua of
-- proxy/redisstore/jobs). The job store prepends this file to each of them
-- (scripts.go), after the script layer's reader of K and A, script.Clock
-- and script.Numbers (str, num), so every job script runs as one self-contained chunk.
-- Redis's clock is the one clock of shared state (ARCHITECTURE.md "One
-- clock"): every script takes now from clock(A.now), and replicas pass the
-- lease as a duration (ms), never an instant.
--
-- A job hash (keyspace, cp:job:{J}) holds its state in 's' (queued, running,
-- cancelling, cancelled, completed, failed) and, while a replica works on
-- it, that replica's token in 'ow' and its lease expiry (ms) in 'lx'.

-- job_final reports whether a job state is final.
local function job_final(s)
  return s == 'cancelled' or s == 'completed' or s == 'failed'
end

-- job_fence returns nil when owner holds the running job j, else why not:
-- 'missing' (no such job), 'cancel' (an admin asked to cancel it) or
-- 'lost' (another replica took it over, or it ended).
local function job_fence(j, owner)
  local f = redis.call('HMGET', j, 's', 'ow')
  if not f[1] then return 'missing' end
  if f[2] ~= owner then return 'lost' end
  if f[1] == 'cancelling' then return 'cancel' end
  if f[1] ~= 'running' then return 'lost' end
  return nil
end

-- job_close ends the job of keys k (k.job, k.items, k.queue) in final
-- state st at now (ms): the lease is dropped and the three keys expire
-- after ttl ms.
local function job_close(k, st, now, ttl)
  redis.call('HSET', k.job, 's', st, 'ft', str(now), 'ut', str(now))
  redis.call('HDEL', k.job, 'ow', 'lx')
  for _, key in ipairs({k.job, k.items, k.queue}) do redis.call('PEXPIRE', key, str(ttl)) end
end
