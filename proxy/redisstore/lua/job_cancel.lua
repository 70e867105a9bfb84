-- job_cancel.lua: ask a replay job to stop. A job nobody works on (queued,
-- or its replica's lease expired) is cancelled at once; a running one is
-- marked cancelling, and its replica stops before its next item
-- (job_claim.lua refuses) and ends it cancelled. Cancelling a job that is
-- cancelling or final changes nothing.
--
-- KEYS: 1 job hash, 2 items hash, 3 queue list
-- ARGV: 1 now ms, 2 who cancels (an admin token's name), 3 retention ms
-- Returns 'missing' or the job's state afterwards.
local f = redis.call('HMGET', KEYS[1], 's', 'ow', 'lx')
if not f[1] then return 'missing' end
if job_final(f[1]) or f[1] == 'cancelling' then return f[1] end
redis.call('HSET', KEYS[1], 'cb', ARGV[2], 'ca', ARGV[1])
if f[1] == 'queued' or not f[2] or num(f[3]) <= tonumber(ARGV[1]) then
  job_close(KEYS, 'cancelled', ARGV[1], ARGV[3])
  return 'cancelled'
end
redis.call('HSET', KEYS[1], 's', 'cancelling', 'ut', ARGV[1])
return 'cancelling'
