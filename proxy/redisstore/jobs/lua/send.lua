-- send.lua: end a replay job's collect phase and start sending from the
-- head of its queue. Fenced on the job's lease, which it renews.
--
-- K and A: sendArgs (scripts.go), read by the script layer: K.job; A.now
-- (ms), A.owner, A.lease_until (ms).
-- Replies (resultReply): result 'ok' or a refusal from job_fence.
local r = job_fence(K.job, A.owner)
if r then return {'result', r} end
redis.call('HSET', K.job, 'ph', 'send', 'i', '0', 'lx', str(A.lease_until), 'ut', str(A.now))
return {'result', 'ok'}
