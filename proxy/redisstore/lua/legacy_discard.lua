-- discard.lua: delete a dead letter (contract §7 "Discarded (set by an admin)
-- deletes the proxy's copy"): its four parts, its index entry and its
-- idempotency reservation when that still points at it.
--
-- KEYS: 1 callout record, 2 its body, 3 its attempt log, 4 its response,
--       5 dead-letter index, 6 idempotency key (or the record key as a
--       placeholder when it has none), 7 endpoint hash, 8 dead-letter bytes
-- ARGV: 1 id
-- Returns 'ok', 'missing' or the callout's state when it is not a dead letter.
local c, dl, idem, id, ep, dlb = KEYS[1], KEYS[5], KEYS[6], ARGV[1], KEYS[7], KEYS[8]
local s = redis.call('HGET', c, 's')
if not s then
  dl_release(ep, dl, dlb, {id})
  return 'missing'
end
if s ~= 'dead_lettered' then return s end
if idem ~= c and redis.call('HGET', idem, 'id') == id then redis.call('DEL', idem) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
dl_release(ep, dl, dlb, {id})
return 'ok'
