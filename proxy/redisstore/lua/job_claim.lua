-- job_claim.lua: take the next queued dead letter of a replay job for
-- sending (queued 'q' -> pending 'p') and advance the job's send position
-- past it, atomically, so that a dead letter is sent at most once per job
-- even when two replicas race. Fenced on the job's lease, which it renews;
-- a cancel request stops the job here, before anything more is sent.
--
-- KEYS: 1 job hash, 2 items hash
-- ARGV: 1 now ms, 2 owner, 3 lease until ms, 4 send position after this
--       item, 5 dead-letter id
-- Returns {'ok'} (claimed), {'done', state} (the item is not queued: its
-- state, e.g. 'p' when a replica died while sending it) or {refusal}.
local j, items = KEYS[1], KEYS[2]
local r = job_fence(j, ARGV[2])
if r then return {r} end
redis.call('HSET', j, 'i', ARGV[4], 'lx', ARGV[3], 'ut', ARGV[1])
local cur = redis.call('HGET', items, ARGV[5])
if cur == 'q' then
  redis.call('HSET', items, ARGV[5], 'p')
  return {'ok'}
end
return {'done', cur or ''}
