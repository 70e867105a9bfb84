-- save.lua: store the replay id after the last batch of events handled,
-- only while the caller still holds the subscriber lease, so that a replica
-- that lost it (a long pause, a partition) cannot move the new holder's
-- position back.
--
-- K and A: saveArgs (sfsub.go): K.lease, K.replay; A.owner (token),
-- A.id (the replay id, bytes).
-- Replies (countReply): n, 1 when stored, 0 when the caller does not hold
-- the lease.
if redis.call('GET', K.lease) ~= A.owner then return {'n', 0} end
redis.call('SET', K.replay, A.id)
return {'n', 1}
