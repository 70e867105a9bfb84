-- release.lua: undo a synchronous callout whose dispatch was
-- refused before anything was sent (a blocked address): contract §5
-- "rejections before dispatch are never stored as the key's result".
-- Fenced on the lease token: the record, its parts, its lease entry, its
-- backlog bytes and item and its reservation (when that still points at
-- it) are deleted, as if it never existed. A probe token it held is
-- released (in a sharded queue, by the caller).
--
-- KEYS: 1 record, 2 its :q, 3 its :r, 4 lease, 5 counters (the endpoint
--       hash or the queue's counter hash), 6 reservation (the record key as
--       a placeholder when it has none)
-- ARGV: 1 id, 2 lease token, 3 raw id (16 bytes), 4 '1' when KEYS[5] is
--       the endpoint hash
-- Returns 'ok' or 'stale'.
local c, lease, acc, res, id, token = KEYS[1], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2]
local rec = hread(c, {'S', 't', 'b', 'i'})
if rec.S ~= 'f' or rec.t ~= token then return 'stale' end
local tag = rec.i or ''
local names = counter_names(tag)
if ARGV[4] == '1' then names[#names + 1] = 'pt' end
local fa, wa = hread(acc, names), {}
acc_add(fa, wa, tag, -num(rec.b), -1)
if ARGV[4] == '1' and fa.pt == token then
  put(fa, wa, 'pt', false)
  put(fa, wa, 'pe', false)
end
hflush(acc, wa)
if res ~= c then
  local v = redis.call('GET', res)
  if v and string.sub(v, 1, 16) == ARGV[3] then redis.call('DEL', res) end
end
redis.call('ZREM', lease, id)
redis.call('DEL', c, KEYS[2], KEYS[3])
return 'ok'
