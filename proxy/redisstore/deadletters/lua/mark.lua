-- mark.lua: note on a dead letter the replay chain that replays it
-- (contract §8), keeping the record's TTL: a replayed dead letter keeps its
-- history until the dead-letter retention ends (contract §7). A record that
-- expired or is no longer a dead letter is not touched (HSET would
-- otherwise create a record without a TTL). The mark is written after the
-- chain was created, so the chain may have ended already (complete.lua
-- writes 'rx' only on the dead letter whose mark names it): then its
-- outcome is noted here, and every replay ends with its mark.
--
-- A chain in another slot (a sharded endpoint's keyless replay, placed in
-- another shard) cannot be read here: the caller reads its state after the
-- mark is written and, when it ended, runs this script again with
-- A.outcome set, which only notes that outcome while the mark still names
-- the chain (so the outcome is noted whichever of the two came first).
--
-- K and A: markArgs (marks.go), read by the script layer
-- (script/): K.record (the dead letter's record), K.chain (the chain's
-- record, in the same slot; K.record when it is not); A.replay_id (the
-- replay chain's callout id), A.now (script.Clock clock), A.outcome ('' to
-- mark; else the chain's final state to note), A.ended (its end, ms; '' for now).
-- Replies (markReply): n, 1 when marked (or noted), else 0.
if redis.call('HGET', K.record, 'S') ~= 'd' then return {'n', 0} end
if A.outcome ~= '' then
  if redis.call('HGET', K.record, 'rb') ~= A.replay_id then return {'n', 0} end
  local ended = A.ended
  if ended == '' then ended = str(clock(A.now)) end
  redis.call('HSET', K.record, 'rx', A.outcome, 'rxt', ended)
  return {'n', 1}
end
redis.call('HSET', K.record, 'rb', A.replay_id, 'rt', str(clock(A.now)))
redis.call('HDEL', K.record, 'rx', 'rxt') -- the outcome of an earlier chain
if K.chain ~= K.record then
  local ch = redis.call('HMGET', K.chain, 'S', 'F')
  if ch[1] == 'o' or ch[1] == 'x' or ch[1] == 'd' then
    redis.call('HSET', K.record, 'rx', st_name[ch[1]], 'rxt', ch[2] or '')
  end
end
return {'n', 1}
