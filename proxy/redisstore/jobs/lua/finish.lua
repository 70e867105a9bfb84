-- finish.lua: end a replay job (completed, cancelled or failed) held by
-- owner; its keys then expire after the job retention.
--
-- K and A: finishArgs (scripts.go), read by the script layer: K.job,
-- K.items, K.queue; A.now (script.Clock), A.owner, A.state (the final state),
-- A.error (why it failed, '' = none), A.retention (ms).
-- Replies (resultReply): result 'ok', 'missing' or 'lost' (the caller does
-- not hold the job, or it is not running any more).
local f = redis.call('HMGET', K.job, 's', 'ow')
if not f[1] then return {'result', 'missing'} end
if f[2] ~= A.owner or job_final(f[1]) or f[1] == 'queued' then return {'result', 'lost'} end
if A.error ~= '' then redis.call('HSET', K.job, 'er', A.error) end
job_close(K, A.state, clock(A.now), A.retention)
return {'result', 'ok'}
