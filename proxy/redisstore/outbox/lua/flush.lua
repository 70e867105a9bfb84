-- flush.lua: take, renew or give back the Salesforce flush lease
-- (flush.go): one replica writes a batch at a time, so replicas do not
-- split batches between them (contract §8). The lease's end is kept in the
-- value, by the injected clock (ARCHITECTURE.md: time is passed in), and
-- the key's TTL only cleans up.
--
-- K and A: flushArgs (flush.go): K.lease the lease key (cp:sf:flush);
-- A.owner the caller's token, A.now (Unix ms), A.lease_until (Unix ms; ''
-- gives the lease back).
-- Replies (flushReply): held, true when the caller holds the lease
-- afterwards (or gave back its own).
local cur = redis.call('GET', K.lease)
local holder, till = nil, 0
if cur then
  local sep = string.find(cur, '|', 1, true)
  if sep then
    holder, till = string.sub(cur, 1, sep - 1), tonumber(string.sub(cur, sep + 1)) or 0
  end
end
local now = tonumber(A.now)
if A.lease_until == '' then
  if holder == A.owner then redis.call('DEL', K.lease) end
  return {'held', 1}
end
if holder and holder ~= A.owner and till > now then return {'held', 0} end
local ttl = tonumber(A.lease_until) - now
if ttl < 1 then ttl = 1 end
redis.call('SET', K.lease, A.owner .. '|' .. A.lease_until, 'PX', ttl + 60000)
return {'held', 1}
