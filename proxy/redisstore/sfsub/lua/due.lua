-- due.lua: take the deferred reprocess requests whose time came, at most
-- A.limit of them, oldest first, and move each to A.later: a replica that
-- dies while it looks at them leaves them to come back then, to whichever
-- replica holds the subscriber lease.
--
-- K and A: dueArgs (sfsub.go): K.again (ZSET record id -> due ms); A.now,
-- A.later (ms), A.limit.
-- Replies (idsReply): ids, the record ids taken.
local ids = redis.call('ZRANGEBYSCORE', K.again, '-inf', A.now, 'LIMIT', 0, A.limit)
for _, id in ipairs(ids) do
  redis.call('ZADD', K.again, 'XX', A.later, id)
end
return {'ids', ids}
