-- discard.lua: delete a dead letter (contract §7 "Discarded (set by an
-- admin) deletes the proxy's copy"): its parts, its index entry and its
-- idempotency reservation when that still points at it, releasing its
-- backlog bytes (dl_release).
--
-- KEYS: 1 record, 2 its :q, 3 its :r, 4 dead-letter index, 5 reservation
--       (the record key as a placeholder when it has none), 6 counters (the
--       endpoint hash or the queue's counter hash), 7 dead-letter bytes
-- ARGV: 1 id, 2 raw id (16 bytes)
-- Returns 'ok', 'missing' or the callout's state when it is not a dead letter.
local c, dl, res, acc, dlb, id = KEYS[1], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1]
local s = redis.call('HGET', c, 'S')
if not s then
  dl_release(acc, dl, dlb, {id})
  return 'missing'
end
if s ~= 'd' then return st_name[s] or s end
if res ~= c then
  local v = redis.call('GET', res)
  if v and string.sub(v, 1, 16) == ARGV[2] then redis.call('DEL', res) end
end
redis.call('DEL', c, KEYS[2], KEYS[3])
dl_release(acc, dl, dlb, {id})
return 'ok'
