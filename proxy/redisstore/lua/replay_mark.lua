-- replay_mark.lua: note on a dead letter the replay chain that replays it
-- (contract §8), keeping the record's TTL: a replayed dead letter keeps its
-- history until the dead-letter retention ends (contract §7). A record that
-- expired or is no longer a dead letter is not touched (HSET would
-- otherwise create a record without a TTL).
--
-- K and A: replayMarkArgs (replaymark.go), read by the script layer
-- (script/): K.record (the dead letter's record); A.replay_id (the replay
-- chain's callout id), A.now (0, or a test's pinned now: lib.lua clock; the
-- mark's time is Redis's).
-- Replies (countReply): n, 1 when marked, else 0.
if redis.call('HGET', K.record, 'S') ~= 'd' then return {'n', 0} end
redis.call('HSET', K.record, 'rb', A.replay_id, 'rt', str(clock(A.now)))
redis.call('HDEL', K.record, 'rx', 'rxt') -- the outcome of an earlier chain
return {'n', 1}
