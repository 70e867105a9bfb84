-- status.lua: set the status a Failed_Callout__c record must show
-- (state.go, contract §7, §8) and, when asked, queue its write ('s:' root).
-- Changes are ordered by their replay chain first, then by their event
-- time: the end of a chain (Reprocessed, Failed Again: A.phase 'end')
-- always wins over its start (Reprocessing: A.phase 'start') whatever the
-- two were stamped, and a start that arrives after its chain ended is
-- ignored; any other change older than the one the record shows is
-- ignored, so writes that arrive out of order never move a record back in
-- its life.
--
-- K and A: statusArgs (state.go): K.due the outbox, K.state the record
-- states (cp:{sN}:sfs); A.now (0, or a test's pinned now in Unix ms:
-- script.Clock), A.root, A.status, A.replay (the replay chain id, '' keep),
-- A.phase ('start', 'end' or ''), A.ends (the statuses that end a chain),
-- A.copy (a replay dead letter whose record is root's, '' none), A.at (the
-- event's time, Unix ms; '' now), A.write (queue the write), A.answers
-- (the SystemModstamp ms of the admin's request the change answers, ''
-- none: 'a:' root keeps the latest, even when the change itself is older).
-- Replies (statusReply): version, the record's new state version, or 0
-- when the change was older.
local root = A.root
local now = str(clock(A.now))
local at = A.at
if at == '' then at = now end
if A.copy ~= '' then redis.call('HSET', K.state, 'r:' .. A.copy, root) end
if A.answers ~= '' and tonumber(A.answers) > num(redis.call('HGET', K.state, 'a:' .. root)) then
  redis.call('HSET', K.state, 'a:' .. root, A.answers)
end
local cur = redis.call('HMGET', K.state, 's:' .. root, 'rc:' .. root, 't:' .. root)
local ended = false
for _, s in ipairs(A.ends) do
  if cur[1] == s then ended = true end
end
local same = A.replay ~= '' and cur[2] == A.replay
if same and A.phase == 'start' and ended then return {'version', 0} end
local by_chain = same and A.phase == 'end' and not ended
if not by_chain and tonumber(at) < num(cur[3]) then return {'version', 0} end
redis.call('HSET', K.state, 's:' .. root, A.status, 't:' .. root, at)
if A.replay ~= '' then redis.call('HSET', K.state, 'rc:' .. root, A.replay) end
local v = redis.call('HINCRBY', K.state, 'v:' .. root, 1)
if A.write then redis.call('ZADD', K.due, 'NX', now, 's:' .. root) end
return {'version', v}
