-- release.lua: give up the lease on a replay job (a replica shutting
-- down), so another replica may take it over at once.
--
-- K and A: releaseArgs (scripts.go), read by the script layer: K.job;
-- A.owner.
-- Replies (releaseReply): released, 1 when the caller held it, else 0.
if redis.call('HGET', K.job, 'ow') ~= A.owner then return {'released', 0} end
redis.call('HDEL', K.job, 'ow', 'lx')
return {'released', 1}
