-- release.lua: undo a callout before anything was sent for it, as if it
-- never existed, with its idempotency reservation (contract §5
-- "rejections before dispatch are never stored as the key's result"):
-- with A.token, Store.Release's (fenced on its lease token: S in flight,
-- t = token; a probe token it held is released, in a sharded queue by the
-- caller); without (A.token ''), Store.withdraw's, only while it is still
-- scheduled or held and no attempt was ever made (no 'n'). A replay
-- chain's reservation goes back to the dead letter it took the key from.
-- Deleted: the record, its parts, its lease or due entry, its backlog
-- bytes and item and its reservation (when that still points at it).
--
-- K and A: releaseArgs (release.go), read by the script layer (script/):
-- K.record, K.rest (:q), K.resp (:r), K.lease, K.due (the callout's
-- organisation queue's), K.counters (the endpoint hash or the queue's
-- counter hash), K.reservation (the record key as a placeholder when it has
-- none); A.id, A.token (lease token, or ''), A.raw (the id's 16 raw bytes),
-- A.home (K.counters is the endpoint hash), A.part (the callout's breaker
-- partition, '' the endpoint's, contract §6), A.takeover and A.takeover_ttl
-- (raw id of a replayed dead letter, or '').
-- Replies (resultReply): result 'ok' or 'stale' (nothing changed).
local c, lease, acc, res, id, token = K.record, K.lease, K.counters, K.reservation, A.id, A.token
local rec = hread(c, {'S', 't', 'b', 'i', 'n'})
if token == '' then
  if (rec.S ~= 's' and rec.S ~= 'h' and rec.S ~= 'g') or rec.n or redis.call('ZREM', K.due, id) == 0 then
    return {'result', 'stale'}
  end
elseif rec.S ~= 'f' or rec.t ~= token then
  return {'result', 'stale'}
end
local tag = rec.i or ''
local names = counter_names(tag)
if A.home then names = concat(names, {'pt', pf('pt', A.part)}) end
local fa, wa = hread(acc, names), {}
acc_add(fa, wa, tag, -num(rec.b), -1)
local probe = nil
if A.home and token ~= '' then probe = probe_of(fa, token, A.part) end
if probe then probe_release(fa, wa, probe) end
hflush(acc, wa)
if res ~= c then
  local v = redis.call('GET', res)
  if v and string.sub(v, 1, 16) == A.raw then
    if A.takeover ~= '' then
      -- a replay chain: the key goes back to the dead letter it replaced
      redis.call('SET', res, A.takeover .. string.sub(v, 17), 'PX', A.takeover_ttl)
    else
      redis.call('DEL', res)
    end
  end
end
redis.call('ZREM', lease, id)
redis.call('DEL', c, K.rest, K.resp)
return {'result', 'ok'}
