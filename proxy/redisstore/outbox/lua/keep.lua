-- keep.lua: keep the callout records that queued Salesforce writes still
-- need (state.go, docs/salesforce.md "No write lost to its own
-- retention"): a dead letter to mirror ('m:' id) or a completion event to
-- publish ('e:' id) is written from its callout's record, so while the
-- entry is queued a record whose TTL has less than A.margin left gets
-- A.margin more (each of its parts that has a TTL; a key without one is
-- left so). The extension is bounded: from the first one, a record is kept
-- at most A.cap longer ('k:' id in the data hash, on Redis's clock; ack.lua
-- drops it with the record's last queued write); past that it is left to
-- expire, and counted.
--
-- K and A: keepArgs (state.go): K.due the outbox, K.data its data hash;
-- A.now (0, or a test's pinned now in Unix ms: script.Clock), A.margin
-- and A.cap (ms), A.candidates, one per record: {id, record, rest, resp}
-- (the callout id and the record's keys, keyspace.RecordParts).
-- Replies (keepReply): kept, the records extended; capped, the records
-- left to expire because their entry reached the cap.
local now = clock(A.now)
local kept, capped = 0, 0
for _, c in ipairs(A.candidates) do
  local mark = 'k:' .. c.id
  if not redis.call('ZSCORE', K.due, 'm:' .. c.id) and not redis.call('ZSCORE', K.due, 'e:' .. c.id) then
    redis.call('HDEL', K.data, mark)
  else
    local ttl = redis.call('PTTL', c.record)
    if ttl >= 0 and ttl < A.margin then
      local since = tonumber(redis.call('HGET', K.data, mark))
      if not since then
        since = now
        redis.call('HSET', K.data, mark, str(now))
      end
      if now - since >= A.cap then
        capped = capped + 1
      else
        for _, k in ipairs({c.record, c.rest, c.resp}) do
          if redis.call('PTTL', k) > 0 then redis.call('PEXPIRE', k, A.margin) end
        end
        kept = kept + 1
      end
    end
  end
end
return {'kept', kept, 'capped', capped}
