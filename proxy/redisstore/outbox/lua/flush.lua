-- flush.lua: take, renew or give back the Salesforce flush lease
-- (flush.go): one replica writes a batch at a time, so replicas do not
-- split batches between them (contract §8). The lease's end is kept in the
-- value, on Redis's clock (script.Clock), and the key's TTL only cleans up.
--
-- K and A: flushArgs (flush.go): K.key the lease key (cp:sf:flush);
-- A.owner the caller's token, A.now (0, or a test's pinned now in Unix ms),
-- A.lease (ms; 0 gives the lease back).
-- Replies (flushReply): held, true when the caller holds the lease
-- afterwards (or gave back its own).
local cur = redis.call('GET', K.key)
local holder, till = nil, 0
if cur then
  local sep = string.find(cur, '|', 1, true)
  if sep then
    holder, till = string.sub(cur, 1, sep - 1), tonumber(string.sub(cur, sep + 1)) or 0
  end
end
if A.lease <= 0 then
  if holder == A.owner then redis.call('DEL', K.key) end
  return {'held', 1}
end
local now = clock(A.now)
if holder and holder ~= A.owner and till > now then return {'held', 0} end
redis.call('SET', K.key, A.owner .. '|' .. str(now + A.lease), 'PX', A.lease + 60000)
return {'held', 1}
