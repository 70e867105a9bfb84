-- discard.lua: delete a dead letter (contract §7 "Discarded (set by an
-- admin) deletes the proxy's copy"): its parts, its index entry and its
-- idempotency reservation when that still points at it, releasing its
-- backlog bytes (dl_release).
--
-- K and A: discardArgs (deadletter.go), read by the script layer
-- (script/): K.record, K.rest (:q), K.resp (:r), K.dl (dead-letter index),
-- K.reservation (the record key as a placeholder when it has none),
-- K.counters (the endpoint hash or the queue's counter hash), K.dlb
-- (dead-letter bytes); A.id, A.raw (the id's 16 raw bytes).
-- Replies (discardReply): result 'ok', 'missing' or the callout's state
-- when it is not a dead letter.
local c, dl, res, acc, dlb, id = K.record, K.dl, K.reservation, K.counters, K.dlb, A.id
local s = redis.call('HGET', c, 'S')
if not s then
  dl_release(acc, dl, dlb, {id})
  return {'result', 'missing'}
end
if s ~= 'd' then return {'result', st_name[s] or s} end
if res ~= c then
  local v = redis.call('GET', res)
  if v and string.sub(v, 1, 16) == A.raw then redis.call('DEL', res) end
end
redis.call('DEL', c, K.rest, K.resp)
dl_release(acc, dl, dlb, {id})
return {'result', 'ok'}
