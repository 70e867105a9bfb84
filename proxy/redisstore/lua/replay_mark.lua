-- replay_mark.lua: note on a dead letter the replay chain that replays it
-- (contract §8), keeping the record's TTL: a replayed dead letter keeps its
-- history until the dead-letter retention ends (contract §7). A record that
-- expired or is no longer a dead letter is not touched (HSET would
-- otherwise create a record without a TTL).
--
-- KEYS: 1 the dead letter's record
-- ARGV: 1 replay chain's callout id, 2 now ms
-- Returns 1 when marked, else 0.
if redis.call('HGET', KEYS[1], 'S') ~= 'd' then return 0 end
redis.call('HSET', KEYS[1], 'rb', ARGV[1], 'rt', ARGV[2])
redis.call('HDEL', KEYS[1], 'rx', 'rxt') -- the outcome of an earlier chain
return 1
