-- claim.lua: lease due callouts of one or more queues to a
-- dispatcher in one script (ARCHITECTURE.md "Redis data model": one claim
-- across due endpoints). Step one, the candidates pipeline (claim.go), read
-- each queue's first due ids; this script re-checks each, so racing
-- dispatchers never claim one callout twice. The caller chose how many of
-- each queue to claim (its free slots, the batch bound: fairness and
-- max_concurrency are the dispatcher's, proxy/dispatch).
--
-- Per queue, first the O(1) gate: disabled, paused, breaker open before its
-- probe time, or a probe out -> claim nothing and touch no callout of it.
-- Half-open (probe time reached, token free) -> take the single probe token
-- and claim exactly one callout, kind 'probe'. A queue of a sharded
-- endpoint gets the gate from the caller (it read the endpoint hash; gate
-- 'probe' means it took the probe token, whose value is the lease token of
-- the queue's one candidate).
--
-- K and A: claimArgs (claim.go), read by the script layer (script/):
-- A.now (lib.lua clock), A.queues, each with its keys due, lease, counters (the endpoint
-- hash or the queue's counter hash) and count (its candidates), gate (''
-- read it from the counters hash), gate_until, lease_ms and probe_lease (ms),
-- want (the most to claim: the candidates past it are spares, for those
-- another replica claimed first), part (the breaker partition its
-- callouts meet and test, '' the endpoint's: an organisation queue's, so a
-- half-open partition's probe is one of its own callouts, contract §6); A.candidates, the queues' candidates in
-- queue order, each with its keys record and rest (:q) and id and token
-- (the lease token it is claimed with).
-- Replies (claimReply): queues, one per queue, in order: {gate, gate_until,
-- level (the partition whose breaker the gate is, '' the endpoint's)};
-- claimed, every callout claimed: {queue (its index in queues), id, kind,
-- attempts, first (ms), due (ms), rest (:q, or absent), record (the
-- record before the claim, HGETALL order)}.
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
        local all = redis.call('HGETALL', c)
        local r = {}
        for j = 1, #all, 2 do r[all[j]] = all[j + 1] end
        if r.S then
          local n = num(r.n) + 1
          local kind = 'retry'
          if g == 'half_open' then
            kind = 'probe'
            put(f, w, pf('pt', level), token)
            put(f, w, pf('pe', level), probe_until)
          elseif g == 'probe' then
            kind = 'probe'
          elseif n == 1 then
            kind = 'first'
            if r.o then kind = 'replay' end
          end
          local fa = lease_record(c, r, n, kind, token, lease_until, now_s)
          zl[#zl + 1] = lease_until
          zl[#zl + 1] = id
          local e = {'queue', qi, 'id', id, 'kind', kind, 'attempts', n, 'first', fa, 'due', score,
            'record', all}
          if r.Q then
            e[#e + 1] = 'rest'
            e[#e + 1] = redis.call('GET', q)
          end
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
