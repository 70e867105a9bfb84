-- outbox_ack.lua: settle claimed entries of one shard's Salesforce outbox
-- (outbox.go). Each entry is settled only while it still carries the
-- claim's lease score; an entry claimed again meanwhile is left alone.
--
--   done:  the write is in Salesforce: the entry and its data go. With a
--          record root, only when the record's state version is still the
--          one the write was built from; otherwise the entry is due again
--          at once, so the newer state is written too. With forget, the
--          record's state goes as well (its last write is done).
--   retry: failed; due again at `at`, failed tries + 1, last error kept,
--          payload replaced when given.
--   defer: not tried (paused, slowed); due again at `at`, nothing counted.
--
-- KEYS: 1 outbox, 2 its data hash, 3 record states (cp:{sN}:sfs)
-- ARGV: 1 lease score ms, 2 now ms, then nine per entry: entry, verdict,
--       at ms, set payload '1'|'0', payload, error, root ('' none),
--       version ('' none), forget '1'|'0'
-- Returns the number of entries left alone (claimed again meanwhile).
local sfo, sfd, sfs = KEYS[1], KEYS[2], KEYS[3]
local lease = tonumber(ARGV[1])
local stale = 0
for i = 3, #ARGV, 9 do
  local m, verdict, at = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local sc = redis.call('ZSCORE', sfo, m)
  if not sc or tonumber(sc) ~= lease then
    stale = stale + 1
  elseif verdict == 'done' then
    local root = ARGV[i + 6]
    if root ~= '' and (redis.call('HGET', sfs, 'v:' .. root) or '') ~= ARGV[i + 7] then
      redis.call('ZADD', sfo, ARGV[2], m)
    else
      redis.call('ZREM', sfo, m)
      redis.call('HDEL', sfd, 'p:' .. m, 'n:' .. m, 'e:' .. m)
      if root ~= '' and ARGV[i + 8] == '1' then
        redis.call('HDEL', sfs, 's:' .. root, 'v:' .. root, 't:' .. root, 'rc:' .. root, 'a:' .. root)
      end
    end
  elseif verdict == 'retry' then
    redis.call('ZADD', sfo, at, m)
    redis.call('HINCRBY', sfd, 'n:' .. m, 1)
    if ARGV[i + 5] ~= '' then redis.call('HSET', sfd, 'e:' .. m, ARGV[i + 5]) end
    if ARGV[i + 3] == '1' then
      if ARGV[i + 4] == '' then
        redis.call('HDEL', sfd, 'p:' .. m)
      else
        redis.call('HSET', sfd, 'p:' .. m, ARGV[i + 4])
      end
    end
  else
    redis.call('ZADD', sfo, at, m)
  end
end
return stale
