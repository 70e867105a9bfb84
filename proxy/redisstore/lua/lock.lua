-- lock.lua: take or renew a named lock held by one replica at a time (the
-- backlog gatherer, the Salesforce reprocess poller).
--
-- K and A: lockArgs (release.go), read by the script layer (script/):
-- K.lock; A.owner (token), A.ttl (ms).
-- Replies (countReply): n, 1 when the caller holds the lock afterwards,
-- else 0.
local cur = redis.call('GET', K.lock)
if cur and cur ~= A.owner then return {'n', 0} end
redis.call('SET', K.lock, A.owner, 'PX', A.ttl)
return {'n', 1}
