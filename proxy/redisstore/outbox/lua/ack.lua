-- ack.lua: settle claimed entries of one shard's Salesforce outbox
-- (outbox.go). Each entry is settled only while it still carries the
-- claim's lease score; an entry claimed again meanwhile is left alone.
--
--   done:  the write is in Salesforce: the entry and its data go. With a
--          record root, only when the record's state version is still the
--          one the write was built from; otherwise the entry is due again
--          at once, so the newer state is written too. With forget, the
--          record's state goes as well (its last write is done).
--   retry: failed; due again `delay` ms from now, failed tries + 1, last
--          error kept, payload replaced when set_payload.
--   defer: not tried (paused, slowed); due again `delay` ms from now,
--          nothing counted.
-- Now is Redis's clock (script.Clock); the caller passes delays, never
-- instants.
--
-- K and A: ackArgs (outbox.go): K.due the outbox, K.data its data hash,
-- K.state the record states (cp:{sN}:sfs); A.lease (the claim's lease
-- score, Unix ms, as claim.lua answered it), A.now (0, or a test's pinned
-- now in Unix ms), A.acks, each {name, verdict, delay (ms), set_payload,
-- payload, error, root ('' none), version ('' none), forget}.
-- Replies (ackReply): stale, the number of entries left alone (claimed
-- again meanwhile).
local lease = tonumber(A.lease)
local now = clock(A.now)
local stale = 0
for _, a in ipairs(A.acks) do
  local m = a.name
  local sc = redis.call('ZSCORE', K.due, m)
  if not sc or tonumber(sc) ~= lease then
    stale = stale + 1
  elseif a.verdict == 'done' then
    local root = a.root
    if root ~= '' and (redis.call('HGET', K.state, 'v:' .. root) or '') ~= a.version then
      redis.call('ZADD', K.due, str(now), m)
    else
      redis.call('ZREM', K.due, m)
      redis.call('HDEL', K.data, 'p:' .. m, 'n:' .. m, 'e:' .. m)
      local kind, id = string.sub(m, 1, 2), string.sub(m, 3)
      if (kind == 'm:' or kind == 'e:') and not redis.call('ZSCORE', K.due, 'm:' .. id)
          and not redis.call('ZSCORE', K.due, 'e:' .. id) then
        redis.call('HDEL', K.data, 'k:' .. id) -- keep.lua's mark: no write needs the record now
      end
      if root ~= '' and a.forget then
        redis.call('HDEL', K.state, 's:' .. root, 'v:' .. root, 't:' .. root, 'rc:' .. root, 'a:' .. root)
      end
    end
  elseif a.verdict == 'retry' then
    redis.call('ZADD', K.due, str(now + a.delay), m)
    redis.call('HINCRBY', K.data, 'n:' .. m, 1)
    if a.error ~= '' then redis.call('HSET', K.data, 'e:' .. m, a.error) end
    if a.set_payload then
      if a.payload == '' then
        redis.call('HDEL', K.data, 'p:' .. m)
      else
        redis.call('HSET', K.data, 'p:' .. m, a.payload)
      end
    end
  else
    redis.call('ZADD', K.due, str(now + a.delay), m)
  end
end
return {'stale', stale}
