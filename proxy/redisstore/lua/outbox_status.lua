-- outbox_status.lua: set the status a Failed_Callout__c record must show
-- (outbox.go, contract §7, §8) and, when asked, queue its write ('s:' root).
-- A change whose event is older than the one the record shows is ignored,
-- so writes that arrive out of order never move a record back in its life.
--
-- KEYS: 1 outbox, 2 record states (cp:{sN}:sfs)
-- ARGV: 1 now ms, 2 root id, 3 status, 4 replay chain id ('' keep),
--       5 copy id: a replay dead letter whose record is root's ('' none),
--       6 event time ms, 7 queue the write '1'|'0', 8 the SystemModstamp ms
--       of the admin's request the change answers ('' none): 'a:' root
--       keeps the latest, even when the change itself is older
-- Returns the record's new state version, or 0 when the change was older.
local sfo, sfs = KEYS[1], KEYS[2]
local root = ARGV[2]
if ARGV[5] ~= '' then redis.call('HSET', sfs, 'r:' .. ARGV[5], root) end
if ARGV[8] ~= '' and tonumber(ARGV[8]) > num(redis.call('HGET', sfs, 'a:' .. root)) then
  redis.call('HSET', sfs, 'a:' .. root, ARGV[8])
end
if tonumber(ARGV[6]) < num(redis.call('HGET', sfs, 't:' .. root)) then return 0 end
redis.call('HSET', sfs, 's:' .. root, ARGV[3], 't:' .. root, ARGV[6])
if ARGV[4] ~= '' then redis.call('HSET', sfs, 'rc:' .. root, ARGV[4]) end
local v = redis.call('HINCRBY', sfs, 'v:' .. root, 1)
if ARGV[7] == '1' then redis.call('ZADD', sfo, 'NX', ARGV[1], 's:' .. root) end
return v
