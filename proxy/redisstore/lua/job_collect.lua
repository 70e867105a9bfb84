-- job_collect.lua: add matching dead letters to a replay job's queue, each
-- at most once however often it matches (the items hash is the set of
-- dead letters the job has ever taken), and save where collection got to.
-- Fenced on the job's lease, which it renews.
--
-- KEYS: 1 job hash, 2 items hash, 3 queue list
-- ARGV: 1 now ms, 2 owner, 3 lease until ms, 4 most items a job may hold,
--       5 collect position (opaque), 6 initial item state ('q' queued, or
--       'w' would-send for a dry run), 7.. dead-letter ids
-- Returns {'ok', total}, {'full', total} (nothing past the cap was added,
-- the position not saved) or {refusal} from job_fence.
local j, items, queue = KEYS[1], KEYS[2], KEYS[3]
local r = job_fence(j, ARGV[2])
if r then return {r} end
local total = num(redis.call('HGET', j, 'tot'))
local cap = tonumber(ARGV[4])
for i = 7, #ARGV do
  if redis.call('HEXISTS', items, ARGV[i]) == 0 then
    if total >= cap then
      redis.call('HSET', j, 'tot', str(total), 'lx', ARGV[3], 'ut', ARGV[1])
      return {'full', total}
    end
    redis.call('HSET', items, ARGV[i], ARGV[6])
    redis.call('RPUSH', queue, ARGV[i])
    total = total + 1
  end
end
redis.call('HSET', j, 'tot', str(total), 'pos', ARGV[5], 'lx', ARGV[3], 'ut', ARGV[1])
return {'ok', total}
