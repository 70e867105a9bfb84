-- outbox_expire.lua: check dead-letter copies whose expiry time has come
-- (outbox.go, contract §7 "When the proxy's copy expires, the record's status
-- becomes Expired"), without keyspace notifications: the dead-letter
-- scripts scheduled each copy in cp:{sN}:sfx at its TTL's end.
--
-- For each candidate still due: a copy that still exists (its TTL was
-- extended, or clocks differ) is checked again when its TTL ends. A copy
-- that is gone marks its record Expired and queues that write ('s:' root)
-- when it is the record's latest copy (the root itself, or its latest
-- replay chain) and the record is not Reprocessed or Discarded; a record in
-- one of those final statuses loses its state instead (nothing more will
-- be written to it).
--
-- KEYS: 1 expiry schedule (cp:{sN}:sfx), 2 outbox, 3 record states, then
--       KEYS[3+i] the record key of candidate i
-- ARGV: 1 now ms, 2 re-check after ms (a copy without TTL),
--       3 Expired, 4 Reprocessed, 5 Discarded (the status values),
--       then ARGV[5+i] the id of candidate i
-- Returns the roots marked Expired.
local sfx, sfo, sfs = KEYS[1], KEYS[2], KEYS[3]
local now_s = ARGV[1]
local now = tonumber(now_s)
local expired, reprocessed, discarded = ARGV[3], ARGV[4], ARGV[5]
local out = {}
for i = 1, #KEYS - 3 do
  local c, id = KEYS[3 + i], ARGV[5 + i]
  local sc = redis.call('ZSCORE', sfx, id)
  if sc and tonumber(sc) <= now then
    if redis.call('EXISTS', c) == 1 then
      local ttl = redis.call('PTTL', c)
      if ttl <= 0 then ttl = tonumber(ARGV[2]) end
      redis.call('ZADD', sfx, str(now + ttl), id)
    else
      redis.call('ZREM', sfx, id)
      local root = redis.call('HGET', sfs, 'r:' .. id) or id
      redis.call('HDEL', sfs, 'r:' .. id)
      local latest = redis.call('HGET', sfs, 'rc:' .. root) or root
      local st = redis.call('HGET', sfs, 's:' .. root)
      if st == reprocessed or st == discarded then
        if id == root or id == latest then
          redis.call('HDEL', sfs, 's:' .. root, 'v:' .. root, 't:' .. root, 'rc:' .. root, 'a:' .. root)
        end
      elseif id == latest then
        redis.call('HSET', sfs, 's:' .. root, expired, 't:' .. root, now_s)
        redis.call('HINCRBY', sfs, 'v:' .. root, 1)
        redis.call('ZADD', sfo, 'NX', now_s, 's:' .. root)
        out[#out + 1] = root
      end
    end
  end
end
return out
