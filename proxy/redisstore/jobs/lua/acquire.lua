-- acquire.lua: take (or renew) the lease on a replay job so that one
-- replica at a time works on it; a queued job starts running, in its
-- collect phase. A lease that expired (its replica died) may be taken over.
--
-- K and A: acquireArgs (scripts.go), read by the script layer: K.job (the
-- job hash); A.now (script.Clock), A.owner (the replica's token), A.lease
-- (ms).
-- Replies (acquireReply): result 'missing', 'final', 'busy' (another
-- replica holds a live lease) or 'ok' with job, the whole job hash
-- afterwards (field, value, ...).
local j, now = K.job, clock(A.now)
local f = redis.call('HMGET', j, 's', 'ow', 'lx')
if not f[1] then return {'result', 'missing'} end
if job_final(f[1]) then return {'result', 'final'} end
if f[2] and f[2] ~= A.owner and num(f[3]) > now then return {'result', 'busy'} end
redis.call('HSET', j, 'ow', A.owner, 'lx', str(now + A.lease), 'ut', str(now))
if f[1] == 'queued' then
  redis.call('HSET', j, 's', 'running', 'sa', str(now), 'ph', 'collect')
end
return {'result', 'ok', 'job', redis.call('HGETALL', j)}
