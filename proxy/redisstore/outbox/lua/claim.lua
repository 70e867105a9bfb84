-- claim.lua: lease due entries of one shard's Salesforce outbox
-- (outbox.go). An entry's score is its due time; claiming moves it to the
-- lease expiry, so an entry whose consumer died becomes due again by
-- itself, and Ack fences on that score: a later claim always scores
-- higher (it happens at or after the expiry and adds a positive lease).
-- Now is Redis's clock (script.Clock): the caller passes the lease as a
-- duration and gets back the lease end the claim wrote, which its Ack
-- fences on.
--
-- K and A: claimArgs (outbox.go), read by the script layer: K.due the
-- outbox (cp:{sN}:sfo), K.data its data hash (cp:{sN}:sfo:d); A.now (0, or
-- a test's pinned now in Unix ms), A.lease (ms), A.limit.
-- Replies (claimReply): lease_until (Unix ms), entries, oldest first, each
-- {name, payload, tries} (failed tries so far).
local now = clock(A.now)
local till = str(now + A.lease)
local due = redis.call('ZRANGEBYSCORE', K.due, '-inf', now, 'LIMIT', 0, A.limit)
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', K.due, 'XX', till, m)
  local d = redis.call('HMGET', K.data, 'p:' .. m, 'n:' .. m)
  out[#out + 1] = {'name', m, 'payload', d[1] or '', 'tries', num(d[2])}
end
return {'lease_until', till, 'entries', out}
