-- reap.lua: return expired leases of callouts to the due set
-- (ARCHITECTURE.md "A reaper returns expired leases"). Step one, the candidates
-- pipeline (claim.go), found them; this script re-checks each.
--
-- What a reaped callout gets: Store.Reap (reap.go). A reaped probe
-- releases the probe token (in a sharded queue the caller does, with the
-- tokens returned).
--
-- K and A: reapArgs (reap.go), read by the script layer (script/): K.due,
-- K.lease, K.counters (the endpoint hash or the queue's counter hash),
-- A.now, A.gate ('' read it from K.counters) and A.gate_until, A.part (the
-- queue's breaker partition, '' the endpoint's, contract §6), and
-- A.candidates, each with its keys record and reservation (the record key
-- when it has none: a reaped synchronous callout's reservation loses
-- Begin's TTL, as it is pending again) and its id.
-- Replies (reapReply): reaped, {id, token} of each callout reaped.
local due, lease, acc = K.due, K.lease, K.counters
local now, given = clock(A.now), A.gate
local now_s = str(now)
local fa, wa, seen = {}, {}, {}
local part = A.part
if given == '' then hmore(acc, fa, seen, gate_fields_of(part)) end

local out, zrem, zadd = {}, {}, {}
for _, cand in ipairs(A.candidates) do
  local c, res, id = cand.record, cand.reservation, cand.id
  local score = redis.call('ZSCORE', lease, id)
  if score and tonumber(score) <= now then
    zrem[#zrem + 1] = id
    local rec, wc = hread(c, {'S', 't', 'x', 'n', 'k', 'l', 'i', 'b', 'd'}), {}
    if rec.S == 'f' then
      local token = rec.t or ''
      local started = num(rec.l)
      local entry = (kind_name[rec.k] or 'retry') .. ' ' .. str(started) .. ' ' .. str(now - started) ..
        ' 0 retryable lease_expired'
      put(rec, wc, 'A' .. str(num(rec.n)), entry)
      local tag = rec.i or ''
      hmore(acc, fa, seen, counter_names(tag))
      put(rec, wc, 'b', str(num(rec.b) + #entry + 1))
      acc_add(fa, wa, tag, #entry + 1, 0)
      local probe = nil
      if given == '' then probe = probe_of(fa, token, part) end
      if probe then probe_release(fa, wa, probe) end
      local g, g_until = gate_in(fa, given, A.gate_until, now, part)
      local _, at, code = holds(shut(g), g_until, now)
      put(rec, wc, 'S', code)
      for _, l in ipairs(lease_fields) do blank(rec, wc, l) end
      hflush(c, wc)
      if res ~= c and rec.d ~= '1' then redis.call('PERSIST', res) end
      zadd[#zadd + 1] = str(at)
      zadd[#zadd + 1] = id
      out[#out + 1] = {'id', id, 'token', token}
    end
  end
end
if #zrem > 0 then redis.call('ZREM', lease, unpack(zrem)) end
if #zadd > 0 then redis.call('ZADD', due, unpack(zadd)) end
hflush(acc, wa)
return {'reaped', out}
