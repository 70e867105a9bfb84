-- collect.lua: add matching dead letters to a replay job's queue, each at
-- most once however often it matches (the items hash is the set of dead
-- letters the job has ever taken), and save where collection got to.
-- Fenced on the job's lease, which it renews.
--
-- K and A: collectArgs (scripts.go), read by the script layer: K.job,
-- K.items, K.queue; A.now (script.Clock), A.owner, A.lease (ms), A.cap (most
-- items a job may hold), A.position (the collect position, opaque), A.ids
-- (dead-letter ids), each added as 'q' (queued).
-- Replies (collectReply): result 'ok' with total, 'full' with total
-- (nothing past the cap was added, the position not saved) or a refusal
-- from job_fence.
local now = clock(A.now)
local r = job_fence(K.job, A.owner)
if r then return {'result', r} end
local total = num(redis.call('HGET', K.job, 'tot'))
for _, id in ipairs(A.ids) do
  if redis.call('HEXISTS', K.items, id) == 0 then
    if total >= A.cap then
      redis.call('HSET', K.job, 'tot', str(total), 'lx', str(now + A.lease), 'ut', str(now))
      return {'result', 'full', 'total', total}
    end
    redis.call('HSET', K.items, id, 'q')
    redis.call('RPUSH', K.queue, id)
    total = total + 1
  end
end
redis.call('HSET', K.job, 'tot', str(total), 'pos', A.position, 'lx', str(now + A.lease), 'ut', str(now))
return {'result', 'ok', 'total', total}
