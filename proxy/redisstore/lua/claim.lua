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
-- KEYS: per queue: due, lease, counters (the endpoint hash or the queue's
--       counter hash), then per candidate its record and its :q
-- ARGV: 1 now ms, 2 number of queues, then per queue 6 values: candidates
--       count, gate ('' read it from the counters hash), gate until ms,
--       lease until ms, probe token until ms, the most to claim (the
--       candidates past it are spares, for those another replica claimed
--       first); then per candidate: id, lease token
-- Returns per queue {gate, gate until, claimed...}, each claimed
--   {id, kind, attempts, first attempt ms, due ms, :q or false, field,
--    value, ...} (the record before the claim, HGETALL order)
local now_s = ARGV[1]
local now = tonumber(now_s)
local ki, ai = 1, 3
local out = {}
for _ = 1, tonumber(ARGV[2]) do
  local due, lease, acc = KEYS[ki], KEYS[ki + 1], KEYS[ki + 2]
  local nc, given, given_until = tonumber(ARGV[ai]), ARGV[ai + 1], ARGV[ai + 2]
  local lease_until, probe_until = ARGV[ai + 3], ARGV[ai + 4]
  local want = tonumber(ARGV[ai + 5]) or nc
  ki, ai = ki + 3, ai + 6
  local f, w = {}, {}
  if given == '' then f = hread(acc, gate_fields) end
  local g, g_until = gate_in(f, given, given_until, now)
  -- a sharded queue probes only with the token its caller took ('probe')
  if given ~= '' and g == 'half_open' then g = 'probing' end
  local res = {g, str(g_until)}
  if g == 'open' or g == 'half_open' or g == 'probe' then
    local ids, zl = {}, {}
    for i = 0, nc - 1 do
      local c, q, id, token = KEYS[ki + 2 * i], KEYS[ki + 2 * i + 1], ARGV[ai + 2 * i], ARGV[ai + 2 * i + 1]
      if (g == 'half_open' or g == 'probe') and #res > 2 then break end
      if #res - 2 >= want then break end
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
            put(f, w, 'pt', token)
            put(f, w, 'pe', probe_until)
          elseif g == 'probe' then
            kind = 'probe'
          elseif n == 1 then
            kind = 'first'
            if r.o then kind = 'replay' end
          end
          local fa = r.a or now_s
          -- 'd': a dispatcher claimed it, so it was scheduled (complete.lua
          -- publishes its completion event, contract §8)
          redis.call('HSET', c, 'S', 'f', 'n', str(n), 't', token, 'x', lease_until, 'l', now_s,
            'k', kind_code[kind], 'd', '1', 'a', fa)
          zl[#zl + 1] = lease_until
          zl[#zl + 1] = id
          local body = false
          if r.Q then body = redis.call('GET', q) end
          local e = {id, kind, str(n), fa, score, body}
          for j = 1, #all do e[#e + 1] = all[j] end
          res[#res + 1] = e
        end
      end
    end
    if #ids > 0 then redis.call('ZREM', due, unpack(ids)) end
    if #zl > 0 then redis.call('ZADD', lease, unpack(zl)) end
    if given == '' then hflush(acc, w) end
  end
  ki, ai = ki + 2 * nc, ai + 2 * nc
  out[#out + 1] = res
end
return out
