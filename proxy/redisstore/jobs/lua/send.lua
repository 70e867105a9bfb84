-- send.lua: end a replay job's collect phase and start sending from the
-- head of its queue. Fenced on the job's lease, which it renews.
--
-- K and A: sendArgs (scripts.go), read by the script layer: K.job;
-- A.now (script.Clock), A.owner, A.lease (ms).
-- Replies (resultReply): result 'ok' or a refusal from job_fence.
local now = clock(A.now)
local r = job_fence(K.job, A.owner)
if r then return {'result', r} end
redis.call('HSET', K.job, 'ph', 'send', 'i', '0', 'lx', str(now + A.lease), 'ut', str(now))
return {'result', 'ok'}
