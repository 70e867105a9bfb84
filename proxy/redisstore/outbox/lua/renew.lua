-- renew.lua: extend the lease of claimed entries of one shard's Salesforce
-- outbox (outbox.go) while their batch is in flight, so a live writer
-- keeps them however long Salesforce takes and a dead one loses them one
-- short lease after its last renewal. Only entries still carrying the
-- claim's lease score move (one claimed again meanwhile is another
-- writer's), and the new score is the fence of their Ack.
--
-- K and A: renewArgs (outbox.go): K.due the outbox; A.now (0, or a test's
-- pinned now in Unix ms: script.Clock), A.lease (the current lease score,
-- Unix ms), A.extend (ms from now), A.names.
-- Replies (renewReply): lease_until (Unix ms), the new lease score;
-- renewed, how many entries moved to it.
local till = str(clock(A.now) + A.extend)
local lease = tonumber(A.lease)
local n = 0
for _, m in ipairs(A.names) do
  local sc = redis.call('ZSCORE', K.due, m)
  if sc and tonumber(sc) == lease then
    redis.call('ZADD', K.due, 'XX', till, m)
    n = n + 1
  end
end
return {'lease_until', till, 'renewed', n}
