-- claim.lua: take the next queued dead letter of a replay job for sending
-- (queued 'q' -> pending 'p') and advance the job's send position past it,
-- atomically, so that a dead letter is sent at most once per job even when
-- two replicas race. Fenced on the job's lease, which it renews; a cancel
-- request stops the job here, before anything more is sent.
--
-- K and A: claimArgs (scripts.go), read by the script layer: K.job,
-- K.items; A.now (script.Clock), A.owner, A.lease (ms), A.next
-- (the send position after this item), A.dead_letter (its id).
-- Replies (claimReply): result 'ok' (claimed), 'done' with state (the item
-- is not queued: its stored state, e.g. 'p' when a replica died while
-- sending it) or a refusal from job_fence.
local now = clock(A.now)
local r = job_fence(K.job, A.owner)
if r then return {'result', r} end
redis.call('HSET', K.job, 'i', str(A.next), 'lx', str(now + A.lease), 'ut', str(now))
local cur = redis.call('HGET', K.items, A.dead_letter)
if cur == 'q' then
  redis.call('HSET', K.items, A.dead_letter, 'p')
  return {'result', 'ok'}
end
return {'result', 'done', 'state', cur or ''}
