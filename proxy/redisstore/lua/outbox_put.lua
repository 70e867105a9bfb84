-- outbox_put.lua: queue entries in one shard's Salesforce outbox
-- (outbox.go). An entry already queued (or claimed) keeps its due time and
-- payload: queuing is idempotent.
--
-- KEYS: 1 outbox, 2 its data hash
-- ARGV: 1 due ms, then pairs: entry, payload ('' none)
-- Returns the number of entries added.
local sfo, sfd = KEYS[1], KEYS[2]
local added = 0
for i = 2, #ARGV, 2 do
  if redis.call('ZADD', sfo, 'NX', ARGV[1], ARGV[i]) == 1 then
    added = added + 1
    if ARGV[i + 1] ~= '' then redis.call('HSET', sfd, 'p:' .. ARGV[i], ARGV[i + 1]) end
  end
end
return added
