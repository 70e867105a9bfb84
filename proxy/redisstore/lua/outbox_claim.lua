-- outbox_claim.lua: lease due entries of one shard's Salesforce outbox
-- (outbox.go). An entry's score is its due time; claiming moves it to the
-- lease expiry, so an entry whose consumer died becomes due again by
-- itself, and Ack fences on that score: a later claim always scores
-- higher (it happens at or after the expiry and adds a positive lease).
--
-- KEYS: 1 outbox (cp:{sN}:sfo), 2 its data hash (cp:{sN}:sfo:d)
-- ARGV: 1 now ms, 2 lease until ms, 3 limit
-- Returns {{entry, payload, failed tries}, ...}, oldest first.
local sfo, sfd = KEYS[1], KEYS[2]
local due = redis.call('ZRANGEBYSCORE', sfo, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', sfo, 'XX', ARGV[2], m)
  local d = redis.call('HMGET', sfd, 'p:' .. m, 'n:' .. m)
  out[#out + 1] = {m, d[1] or '', num(d[2])}
end
return out
