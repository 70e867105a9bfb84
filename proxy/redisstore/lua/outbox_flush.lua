-- outbox_flush.lua: take, renew or give back the Salesforce flush lease
-- (outbox_flush.go): one replica writes a batch at a time, so replicas do
-- not split batches between them (contract §8). The lease's end is kept in the
-- value, by the injected clock (ARCHITECTURE.md: time is passed in), and the key's
-- TTL only cleans up.
--
-- KEYS: 1 the lease key (cp:sf:flush)
-- ARGV: 1 owner token, 2 now ms, 3 lease until ms ('' gives it back)
-- Returns 1 when the caller holds the lease afterwards (or gave back its
-- own), else 0.
local cur = redis.call('GET', KEYS[1])
local holder, till = nil, 0
if cur then
  local sep = string.find(cur, '|', 1, true)
  if sep then
    holder, till = string.sub(cur, 1, sep - 1), tonumber(string.sub(cur, sep + 1)) or 0
  end
end
local now = tonumber(ARGV[2])
if ARGV[3] == '' then
  if holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 1
end
if holder and holder ~= ARGV[1] and till > now then return 0 end
local ttl = tonumber(ARGV[3]) - now
if ttl < 1 then ttl = 1 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3], 'PX', ttl + 60000)
return 1
