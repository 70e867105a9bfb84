-- job_acquire.lua: take (or renew) the lease on a replay job so that one
-- replica at a time works on it; a queued job starts running, in its
-- collect phase. A lease that expired (its replica died) may be taken over.
--
-- KEYS: 1 job hash
-- ARGV: 1 now ms, 2 owner token, 3 lease until ms
-- Returns {'missing'}, {'final'}, {'busy'} (another replica holds a live
-- lease) or {'ok', field, value, ...} (the whole job hash afterwards).
local j = KEYS[1]
local now = tonumber(ARGV[1])
local f = redis.call('HMGET', j, 's', 'ow', 'lx')
if not f[1] then return {'missing'} end
if job_final(f[1]) then return {'final'} end
if f[2] and f[2] ~= ARGV[2] and num(f[3]) > now then return {'busy'} end
redis.call('HSET', j, 'ow', ARGV[2], 'lx', ARGV[3], 'ut', ARGV[1])
if f[1] == 'queued' then
  redis.call('HSET', j, 's', 'running', 'sa', ARGV[1], 'ph', 'collect')
end
return {'ok', unpack(redis.call('HGETALL', j))}
