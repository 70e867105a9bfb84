-- discard.lua: delete a dead letter (contract §7 "Discarded (set by an
-- admin) deletes the proxy's copy"): its parts, its index entry and its
-- idempotency reservation when that still points at it, releasing its
-- backlog bytes (dl_release).
--
-- With the outbox on (A.outbox), the Salesforce writes still queued for it
-- go or stay as docs/salesforce.md "Discarding a dead letter" says: its
-- mirror ('m:' id) goes with its data, and its expiry check (K.sfx) when
-- that mirror was never sent, unless it is a replay chain's (field o); a
-- completion event ('e:' id) stays, and so does the record it is built
-- from, for at most A.keep ms (keep.lua extends that while it waits).
--
-- K and A: discardArgs (discard.go), read by the script layer
-- (script/): K.record, K.rest (:q), K.resp (:r), K.dl (dead-letter index),
-- K.reservation (the record key as a placeholder when it has none),
-- K.counters (the endpoint hash or the queue's counter hash), K.dlb
-- (dead-letter bytes), K.sfo K.sfd K.sfx (the shard's outbox, its data
-- hash and its expiry schedule); A.id, A.raw (the id's 16 raw bytes),
-- A.outbox, A.keep (ms).
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
local keep = false
if A.outbox then
  local m = 'm:' .. id
  if present(redis.call('HGET', c, 'o')) then
    -- a replay chain's dead letter writes its root's record, which
    -- Salesforce has: its mirror (Failed Again) and expiry stay queued
    keep = redis.call('ZSCORE', K.sfo, m) ~= false
  elseif redis.call('ZREM', K.sfo, m) == 1 then
    redis.call('ZREM', K.sfx, id)
    redis.call('HDEL', K.sfd, 'p:' .. m, 'n:' .. m, 'e:' .. m)
  end
  keep = keep or redis.call('ZSCORE', K.sfo, 'e:' .. id) ~= false
end
if keep then
  for _, k in ipairs({c, K.rest, K.resp}) do
    local ttl = redis.call('PTTL', k)
    if ttl < 0 or ttl > A.keep then redis.call('PEXPIRE', k, A.keep) end
  end
else
  redis.call('DEL', c, K.rest, K.resp)
end
dl_release(acc, dl, dlb, {id})
return {'result', 'ok'}
