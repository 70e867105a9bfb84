-- put.lua: queue entries in one shard's Salesforce outbox (outbox.go). An
-- entry already queued (or claimed) keeps its due time and payload:
-- queuing is idempotent. Now is Redis's clock (script.Clock).
--
-- K and A: putArgs (outbox.go): K.due the outbox, K.data its data hash;
-- A.now (0, or a test's pinned now in Unix ms), A.delay (ms from now until
-- the entries are due), A.items, each {name, payload ('' none)}.
-- Replies (putReply): added, the number of entries added.
local at = str(clock(A.now) + A.delay)
local added = 0
for _, it in ipairs(A.items) do
  if redis.call('ZADD', K.due, 'NX', at, it.name) == 1 then
    added = added + 1
    if it.payload ~= '' then redis.call('HSET', K.data, 'p:' .. it.name, it.payload) end
  end
end
return {'added', added}
