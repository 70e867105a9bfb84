-- due.lua: take the deferred reprocess requests whose time came on Redis's
-- clock (script.Clock), at most A.limit of them, oldest first, and move
-- each a lease ahead: a replica that dies while it looks at them leaves
-- them to come back then, to whichever replica holds the subscriber lease.
--
-- K and A: dueArgs (sfsub.go): K.again (ZSET record id -> due ms, Redis's
-- clock); A.now (clock: 0, or a test's pinned ms), A.lease (ms), A.limit.
-- Replies (idsReply): ids, the record ids taken.
local now = clock(A.now)
local ids = redis.call('ZRANGEBYSCORE', K.again, '-inf', now, 'LIMIT', 0, A.limit)
for _, id in ipairs(ids) do
  redis.call('ZADD', K.again, 'XX', now + A.lease, id)
end
return {'ids', ids}
