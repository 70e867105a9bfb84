-- disable.lua: mark an endpoint disabled (SPEC §6), once: reason and time
-- are written only by the call that disabled it. Its pending callouts are
-- moved to the dead letters afterwards by drain.lua, in bounded batches.
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 now ms, 2 reason
-- Returns 1 when this call disabled it, 0 when it already was.
if redis.call('HSETNX', KEYS[1], 'dis', '1') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'dr', ARGV[2], 'dat', ARGV[1])
return 1
