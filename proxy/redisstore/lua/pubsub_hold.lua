-- pubsub_hold.lua: take or renew the Pub/Sub subscriber lock (one replica
-- subscribes at a time; pubsub.go documents the keys).
--
-- KEYS: 1 lock key
-- ARGV: 1 owner token, 2 TTL ms
-- Returns 1 when the caller holds the lock afterwards, else 0.
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
