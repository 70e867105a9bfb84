-- status.lua: set the status a Failed_Callout__c record must show
-- (state.go, contract §7, §8) and, when asked, queue its write ('s:' root).
-- A change whose event is older than the one the record shows is ignored,
-- so writes that arrive out of order never move a record back in its life.
--
-- K and A: statusArgs (state.go): K.due the outbox, K.state the record
-- states (cp:{sN}:sfs); A.now (Unix ms), A.root, A.status, A.replay (the
-- replay chain id, '' keep), A.copy (a replay dead letter whose record is
-- root's, '' none), A.at (the event's time, Unix ms), A.write (queue the
-- write), A.answers (the SystemModstamp ms of the admin's request the
-- change answers, '' none: 'a:' root keeps the latest, even when the
-- change itself is older).
-- Replies (statusReply): version, the record's new state version, or 0
-- when the change was older.
local root = A.root
if A.copy ~= '' then redis.call('HSET', K.state, 'r:' .. A.copy, root) end
if A.answers ~= '' and tonumber(A.answers) > num(redis.call('HGET', K.state, 'a:' .. root)) then
  redis.call('HSET', K.state, 'a:' .. root, A.answers)
end
if tonumber(A.at) < num(redis.call('HGET', K.state, 't:' .. root)) then return {'version', 0} end
redis.call('HSET', K.state, 's:' .. root, A.status, 't:' .. root, A.at)
if A.replay ~= '' then redis.call('HSET', K.state, 'rc:' .. root, A.replay) end
local v = redis.call('HINCRBY', K.state, 'v:' .. root, 1)
if A.write then redis.call('ZADD', K.due, 'NX', A.now, 's:' .. root) end
return {'version', v}
