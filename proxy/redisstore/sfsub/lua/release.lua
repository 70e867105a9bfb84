-- release.lua: give the subscriber lease back when the caller holds it (a
-- replica whose stream failed, or that shuts down), so that another replica
-- may subscribe at once.
--
-- K and A: releaseArgs (sfsub.go): K.lease; A.owner (token).
-- Replies (countReply): n, 1 when released, else 0.
if redis.call('GET', K.lease) ~= A.owner then return {'n', 0} end
redis.call('DEL', K.lease)
return {'n', 1}
