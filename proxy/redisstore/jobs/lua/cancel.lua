-- cancel.lua: ask a replay job to stop. A job nobody works on (queued, or
-- its replica's lease expired) is cancelled at once; a running one is
-- marked cancelling, and its replica stops before its next item
-- (claim.lua refuses) and ends it cancelled. Cancelling a job that is
-- cancelling or final changes nothing.
--
-- K and A: cancelArgs (scripts.go), read by the script layer: K.job,
-- K.items, K.queue (the job's keys); A.now (script.Clock), A.by (who
-- cancels, an admin token's name), A.retention (ms).
-- Replies (cancelReply): result 'missing', or 'ok' with state, the job's
-- state afterwards.
local now = clock(A.now)
local f = redis.call('HMGET', K.job, 's', 'ow', 'lx')
if not f[1] then return {'result', 'missing'} end
if job_final(f[1]) or f[1] == 'cancelling' then return {'result', 'ok', 'state', f[1]} end
redis.call('HSET', K.job, 'cb', A.by, 'ca', str(now))
if f[1] == 'queued' or not f[2] or num(f[3]) <= now then
  job_close(K, 'cancelled', now, A.retention)
  return {'result', 'ok', 'state', 'cancelled'}
end
redis.call('HSET', K.job, 's', 'cancelling', 'ut', str(now))
return {'result', 'ok', 'state', 'cancelling'}
