-- expire.lua: check dead-letter copies whose expiry time has come
-- (state.go, contract §7 "When the proxy's copy expires, the record's
-- status becomes Expired"), without keyspace notifications: the core's
-- dead-letter scripts scheduled each copy in cp:{sN}:sfx at its TTL's end.
--
-- For each candidate still due: a copy that still exists (its TTL was
-- extended, or clocks differ) is checked again when its TTL ends. A copy
-- that is gone marks its record Expired and queues that write ('s:' root)
-- when it is the record's latest copy (the root itself, or its latest
-- replay chain) and the record is not Reprocessed or Discarded; a record in
-- one of those final statuses loses its state instead (nothing more will
-- be written to it).
--
-- K and A: expireArgs (state.go): K.expiry the expiry schedule
-- (cp:{sN}:sfx), K.due the outbox, K.state the record states; A.now (0,
-- or a test's pinned now in Unix ms: script.Clock), A.recheck (ms: when a copy without TTL is checked again),
-- A.expired, A.reprocessed, A.discarded (the status values), A.candidates,
-- each {record (a key), id}.
-- Replies (expireReply): roots, the roots marked Expired.
local now = clock(A.now)
local now_s = str(now)
local out = {}
for _, cand in ipairs(A.candidates) do
  local c, id = cand.record, cand.id
  local sc = redis.call('ZSCORE', K.expiry, id)
  if sc and tonumber(sc) <= now then
    if redis.call('EXISTS', c) == 1 then
      local ttl = redis.call('PTTL', c)
      if ttl <= 0 then ttl = A.recheck end
      redis.call('ZADD', K.expiry, str(now + ttl), id)
    else
      redis.call('ZREM', K.expiry, id)
      local root = redis.call('HGET', K.state, 'r:' .. id) or id
      redis.call('HDEL', K.state, 'r:' .. id)
      local latest = redis.call('HGET', K.state, 'rc:' .. root) or root
      local st = redis.call('HGET', K.state, 's:' .. root)
      if st == A.reprocessed or st == A.discarded then
        if id == root or id == latest then
          redis.call('HDEL', K.state, 's:' .. root, 'v:' .. root, 't:' .. root, 'rc:' .. root, 'a:' .. root)
        end
      elseif id == latest then
        redis.call('HSET', K.state, 's:' .. root, A.expired, 't:' .. root, now_s)
        redis.call('HINCRBY', K.state, 'v:' .. root, 1)
        redis.call('ZADD', K.due, 'NX', now_s, 's:' .. root)
        out[#out + 1] = root
      end
    end
  end
end
return {'roots', out}
