-- put.lua: queue entries in one shard's Salesforce outbox (outbox.go). An
-- entry already queued (or claimed) keeps its due time and payload:
-- queuing is idempotent.
--
-- K and A: putArgs (outbox.go): K.due the outbox, K.data its data hash;
-- A.at the due time (Unix ms), A.items, each {name, payload ('' none)}.
-- Replies (putReply): added, the number of entries added.
local added = 0
for _, it in ipairs(A.items) do
  if redis.call('ZADD', K.due, 'NX', A.at, it.name) == 1 then
    added = added + 1
    if it.payload ~= '' then redis.call('HSET', K.data, 'p:' .. it.name, it.payload) end
  end
end
return {'added', added}
