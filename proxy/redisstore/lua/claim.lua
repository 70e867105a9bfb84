-- claim.lua: lease due callouts of one or more queues to a dispatcher in
-- one script (ARCHITECTURE.md "Redis data model"). The candidates pipeline
-- (claim.go) read each queue's first due ids; this script re-checks each,
-- so racing dispatchers never claim one callout twice.
--
-- Per queue, first the O(1) gate: shut (disabled, paused, breaker open
-- before its probe time, a probe out) -> claim nothing of it. Half-open ->
-- take the probe token and claim one callout, kind 'probe'. A queue of a
-- sharded endpoint gets the gate from the caller (gate 'probe': it took
-- the probe token, valued the lease token of its one candidate).
--
-- K and A: claimArgs (claim.go, which names each field and its unit).
-- Replies (claimReply): queues, one per queue, in order: {gate,
-- gate_until, level (the partition whose breaker the gate is, '' the
-- endpoint's)}; claimed, every callout claimed (lease_due's, with queue:
-- its index in queues).
local now = clock(A.now)
local now_s = str(now)
local queues, claimed = {}, {}
local ci = 1 -- the candidates' index of the queue's first
for qi, qa in ipairs(A.queues) do
  local due, lease, acc = qa.due, qa.lease, qa.counters
  local nc, given, given_until = qa.count, qa.gate, qa.gate_until
  local lease_until, probe_until = str(now + qa.lease_ms), str(now + qa.probe_lease)
  local want, part = qa.want, qa.part
  local f, w = {}, {}
  if given == '' then f = hread(acc, gate_fields_of(part)) end
  local g, g_until, level = gate_in(f, given, given_until, now, part)
  -- a sharded queue probes only with the token its caller took ('probe')
  if given ~= '' and g == 'half_open' then g = 'probing' end
  queues[qi] = {'gate', g, 'gate_until', g_until, 'level', level}
  if g == 'open' or g == 'half_open' or g == 'probe' then
    local ids, zl, got = {}, {}, 0
    for i = 0, nc - 1 do
      local cand = A.candidates[ci + i]
      local c, q, id, token = cand.record, cand.rest, cand.id, cand.token
      if (g == 'half_open' or g == 'probe') and got > 0 then break end
      if got >= want then break end
      local score = redis.call('ZSCORE', due, id)
      if score and tonumber(score) <= now then
        ids[#ids + 1] = id
        local e = lease_due(c, q, id, score, g ~= 'open', token, lease_until, now_s, zl)
        if e then
          if g == 'half_open' then
            put(f, w, pf('pt', level), token)
            put(f, w, pf('pe', level), probe_until)
          end
          e[#e + 1] = 'queue'
          e[#e + 1] = qi
          claimed[#claimed + 1] = e
          got = got + 1
        end
      end
    end
    if #ids > 0 then redis.call('ZREM', due, unpack(ids)) end
    if #zl > 0 then redis.call('ZADD', lease, unpack(zl)) end
    if given == '' then hflush(acc, w) end
  end
  ci = ci + nc
end
return {'queues', queues, 'claimed', claimed}
