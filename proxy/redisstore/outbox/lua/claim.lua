-- claim.lua: lease due entries of one shard's Salesforce outbox
-- (outbox.go). An entry's score is its due time; claiming moves it to the
-- lease expiry, so an entry whose consumer died becomes due again by
-- itself, and Ack fences on that score: a later claim always scores
-- higher (it happens at or after the expiry and adds a positive lease).
--
-- K and A: claimArgs (outbox.go), read by the script layer: K.due the
-- outbox (cp:{sN}:sfo), K.data its data hash (cp:{sN}:sfo:d); A.now and
-- A.lease_until (Unix ms), A.limit.
-- Replies (claimReply): entries, oldest first, each {name, payload,
-- tries} (failed tries so far).
local due = redis.call('ZRANGEBYSCORE', K.due, '-inf', A.now, 'LIMIT', 0, A.limit)
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', K.due, 'XX', A.lease_until, m)
  local d = redis.call('HMGET', K.data, 'p:' .. m, 'n:' .. m)
  out[#out + 1] = {'name', m, 'payload', d[1] or '', 'tries', num(d[2])}
end
return {'entries', out}
