-- job_finish.lua: end a replay job (completed, cancelled or failed) held
-- by owner; its keys then expire after the job retention.
--
-- KEYS: 1 job hash, 2 items hash, 3 queue list
-- ARGV: 1 now ms, 2 owner, 3 final state, 4 error text ('' = none),
--       5 retention ms
-- Returns 'ok', 'missing' or 'lost' (the caller does not hold the job, or
-- it is not running any more).
local f = redis.call('HMGET', KEYS[1], 's', 'ow')
if not f[1] then return 'missing' end
if f[2] ~= ARGV[2] or job_final(f[1]) or f[1] == 'queued' then return 'lost' end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'er', ARGV[4]) end
job_close(KEYS, ARGV[3], ARGV[1], ARGV[5])
return 'ok'
