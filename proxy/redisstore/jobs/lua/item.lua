-- item.lua: record the result of a claimed (pending) item of a replay job
-- and count it. Not fenced on the lease: the replay it records has
-- happened, whoever holds the job now. An item that is no longer pending is
-- left alone (its result was recorded already).
--
-- K and A: itemArgs (scripts.go), read by the script layer: K.job,
-- K.items; A.now (script.Clock), A.dead_letter (its id), A.result (the encoded
-- result), A.counter (the job hash field it counts in).
-- Replies (itemReply): recorded, 1 when recorded, 0 when the item was not
-- pending.
if redis.call('HGET', K.items, A.dead_letter) ~= 'p' then return {'recorded', 0} end
redis.call('HSET', K.items, A.dead_letter, A.result)
redis.call('HINCRBY', K.job, A.counter, 1)
redis.call('HSET', K.job, 'ut', str(clock(A.now)))
return {'recorded', 1}
