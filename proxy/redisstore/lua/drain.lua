-- drain.lua: turn one bounded batch of a disabled endpoint's due
-- callouts (scheduled or held) into dead letters with reason
-- endpoint_disabled (contract §6). Callouts in flight are left to their worker:
-- their completion or their reaping brings them back here.
--
-- K and A: drainArgs (admin.go), read by the script layer (script/):
-- K.counters (the endpoint hash, or the queue's counter hash), K.due, K.dl
-- (dead-letter index), K.sfo (Salesforce outbox), K.sfx (its expiry
-- schedule, proxy/redisstore/outbox), K.dlb (dead-letter bytes); A.now (lib.lua clock),
-- A.dead_ttl (ms; index entries older are pruned on the way), A.outbox, A.gate ('' read it from K.counters; else
-- the gate the caller read), and A.callouts, each with its keys record,
-- rest (:q), resp (:r), reservation (the record key as a placeholder when
-- it has none) and its id.
-- Replies (drainReply): dead, the ids dead-lettered (none when the
-- endpoint is not disabled).
local acc, due, dl, sfo, sfx, dlb = K.counters, K.due, K.dl, K.sfo, K.sfx, K.dlb
local fa, wa, seen = {}, {}, {}
local now = clock(A.now)
local now_s, prune_before = str(now), str(now - tonumber(A.dead_ttl))
if A.gate == '' then
  hmore(acc, fa, seen, {'dis'})
  if fa.dis ~= '1' then return {'dead', {}} end
elseif A.gate ~= 'disabled' then
  return {'dead', {}}
end
local out = {}
for _, co in ipairs(A.callouts) do
  local keys = {c = co.record, q = co.rest, r = co.resp, res = co.reservation, dl = dl, dlb = dlb}
  local id = co.id
  if redis.call('ZREM', due, id) == 1 then
    local rec, wc = hread(keys.c, {'S', 'b', 'i', 'Q', 'd'}), {}
    if rec.S then
      hmore(acc, fa, seen, counter_names(rec.i or ''))
      dead_letter(keys, rec, wc, fa, wa, id, 'endpoint_disabled', now_s, A.dead_ttl, prune_before,
        function(names) hmore(acc, fa, seen, names) end)
      -- Salesforce outbox in the same script (proxy/redisstore/outbox); a due callout was
      -- scheduled, so its ending publishes a completion event (contract §8).
      if A.outbox then outbox_dead_letter(keys.c, sfo, sfx, id, now_s, A.dead_ttl, true) end
      out[#out + 1] = id
    end
  end
end
hflush(acc, wa)
return {'dead', out}
