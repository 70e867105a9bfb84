-- pubsub_release.lua: give the subscriber lock back when the caller holds
-- it (a replica shutting down), so another replica subscribes at once.
--
-- KEYS: 1 lock key
-- ARGV: 1 owner token
-- Returns 1 when released, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
