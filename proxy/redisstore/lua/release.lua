-- release.lua: undo a synchronous callout whose dispatch was
-- refused before anything was sent (a blocked address): contract §5
-- "rejections before dispatch are never stored as the key's result".
-- Fenced on the lease token: the record, its parts, its lease entry, its
-- backlog bytes and item and its reservation (when that still points at
-- it) are deleted, as if it never existed. A probe token it held is
-- released (in a sharded queue, by the caller).
--
-- K and A: releaseArgs (release.go), read by the script layer (script/):
-- K.record, K.rest (:q), K.resp (:r), K.lease, K.counters (the endpoint
-- hash or the queue's counter hash), K.reservation (the record key as a
-- placeholder when it has none); A.id, A.token (lease token), A.raw (the
-- id's 16 raw bytes), A.home (K.counters is the endpoint hash), A.part (the
-- callout's breaker partition, '' the endpoint's, contract §6).
-- Replies (releaseReply): result 'ok' or 'stale'.
local c, lease, acc, res, id, token = K.record, K.lease, K.counters, K.reservation, A.id, A.token
local rec = hread(c, {'S', 't', 'b', 'i'})
if rec.S ~= 'f' or rec.t ~= token then return {'result', 'stale'} end
local tag = rec.i or ''
local names = counter_names(tag)
if A.home then names = concat(names, {'pt', pf('pt', A.part)}) end
local fa, wa = hread(acc, names), {}
acc_add(fa, wa, tag, -num(rec.b), -1)
local probe = nil
if A.home then probe = probe_of(fa, token, A.part) end
if probe then
  put(fa, wa, pf('pt', probe), false)
  put(fa, wa, pf('pe', probe), false)
end
hflush(acc, wa)
if res ~= c then
  local v = redis.call('GET', res)
  if v and string.sub(v, 1, 16) == A.raw then redis.call('DEL', res) end
end
redis.call('ZREM', lease, id)
redis.call('DEL', c, K.rest, K.resp)
return {'result', 'ok'}
