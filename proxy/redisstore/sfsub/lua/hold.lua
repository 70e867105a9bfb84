-- hold.lua: take or renew the Pub/Sub subscriber lease (one replica
-- subscribes to a topic at a time; the keyspace package documents the keys).
--
-- K and A: holdArgs (sfsub.go): K.lease; A.owner (token), A.ttl (ms).
-- Replies (countReply): n, 1 when the caller holds the lease afterwards,
-- else 0.
local cur = redis.call('GET', K.lease)
if cur and cur ~= A.owner then return {'n', 0} end
redis.call('SET', K.lease, A.owner, 'PX', A.ttl)
return {'n', 1}
