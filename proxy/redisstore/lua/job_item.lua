-- job_item.lua: record the result of a claimed (pending) item of a replay
-- job and count it. Not fenced on the lease: the replay it records has
-- happened, whoever holds the job now. An item that is no longer pending
-- is left alone (its result was recorded already).
--
-- KEYS: 1 job hash, 2 items hash
-- ARGV: 1 now ms, 2 dead-letter id, 3 encoded result, 4 counter field
-- Returns 1 when recorded, 0 when the item was not pending.
if redis.call('HGET', KEYS[2], ARGV[2]) ~= 'p' then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
redis.call('HSET', KEYS[1], 'ut', ARGV[1])
return 1
