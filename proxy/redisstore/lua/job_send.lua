-- job_send.lua: end a replay job's collect phase and start sending from
-- the head of its queue. Fenced on the job's lease, which it renews.
--
-- KEYS: 1 job hash
-- ARGV: 1 now ms, 2 owner, 3 lease until ms
-- Returns 'ok' or a refusal from job_fence.
local r = job_fence(KEYS[1], ARGV[2])
if r then return r end
redis.call('HSET', KEYS[1], 'ph', 'send', 'i', '0', 'lx', ARGV[3], 'ut', ARGV[1])
return 'ok'
