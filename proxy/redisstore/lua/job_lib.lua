-- job_lib.lua: helpers shared by the replay-job scripts (job_*.lua). The
-- job store prepends lib.lua and then this file to each of them
-- (replayjob.go), so every job script runs as one self-contained chunk.
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

-- job_close ends job j in final state st at now_s: the lease is dropped
-- and the job's three keys (hash, items, queue) expire after ttl ms.
local function job_close(keys, st, now_s, ttl)
  redis.call('HSET', keys[1], 's', st, 'ft', now_s, 'ut', now_s)
  redis.call('HDEL', keys[1], 'ow', 'lx')
  for i = 1, 3 do redis.call('PEXPIRE', keys[i], ttl) end
end
