-- pubsub_save.lua: store the replay id of the last processed batch, only
-- while the caller still holds the subscriber lock, so that a replica that
-- lost it (a long pause, a partition) cannot move the new holder's position
-- back (pubsub.go documents the keys).
--
-- KEYS: 1 lock key, 2 replay id key
-- ARGV: 1 owner token, 2 replay id (bytes)
-- Returns 1 when stored, 0 when the caller does not hold the lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
