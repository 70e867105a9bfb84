-- release.lua: undo a synchronous callout whose dispatch was refused before
-- anything was sent (a blocked address): SPEC §5 "rejections before dispatch
-- are never stored as the key's result". Fenced on the lease token: the
-- record, its parts, its lease entry, its backlog bytes and item and its reservation
-- (when that still points at it) are deleted, as if it never existed.
--
-- KEYS: 1 callout record, 2 body, 3 attempt log, 4 response, 5 lease set,
--       6 endpoint hash, 7 idempotency key (or the record key as a
--       placeholder when it has none)
-- ARGV: 1 id, 2 lease token
-- Returns 'ok' or 'stale'.
local c, lease, ep, idem, id = KEYS[1], KEYS[5], KEYS[6], KEYS[7], ARGV[1]
if redis.call('HGET', c, 'lt') ~= ARGV[2] then return 'stale' end
unpend(ep, uncharge(c, KEYS[2], ep))
if idem ~= c and redis.call('HGET', idem, 'id') == id then redis.call('DEL', idem) end
if redis.call('HGET', ep, 'pt') == ARGV[2] then redis.call('HDEL', ep, 'pt', 'pe') end
redis.call('ZREM', lease, id)
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 'ok'
