-- job_release.lua: give up the lease on a replay job (a replica shutting
-- down), so another replica may take it over at once.
--
-- KEYS: 1 job hash
-- ARGV: 1 owner
-- Returns 1 when the caller held it, else 0.
if redis.call('HGET', KEYS[1], 'ow') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'ow', 'lx')
return 1
