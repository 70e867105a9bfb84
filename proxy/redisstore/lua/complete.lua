-- complete.lua: atomic completions of leased attempts of callouts of one
-- queue (ARCHITECTURE.md "Data flow" 2), applied one after another in
-- their order: each fences on its lease token, logs the attempt, keeps the
-- last response, updates the circuit breaker and pause, then acks /
-- reschedules / continues inline / dead-letters. complete_one below is the
-- one copy of these rules; Store.Complete calls this script with one
-- completion, the Completer with up to completeBatchMax of one queue.
-- Applying N completions in one call is the same as applying them in N
-- calls in that order: each sees the counters, breaker and gate as the
-- previous one left them (in memory, fa), the due set and records as they
-- are in Redis. The counters hash is written once at the end (hflush), the
-- gate published once (gate_publish).
--
-- Isolation: each completion runs under pcall (docs/performance.md "What
-- a failing completion means"): one that raises an error gets an error
-- reply of its own; failed before its record was written, its changes to
-- the counters and breaker in memory are dropped; failed after, they stand.
--
-- A queue of a sharded endpoint (keyspace "Shards and queues") is not in
-- the endpoint hash's slot: the caller passes the gate it read and applies
-- the attempt to the breaker itself (outcome.lua, in the same pipeline);
-- this script then neither reads nor writes breaker fields.
--
-- K and A: completeArgs and completeItem (complete.go, which give each
-- field's meaning and unit). After the completions, the claim of the
-- queue's next callouts (claim_want, 0: none; below).
-- Replies (completeReply): claimed, the callouts that claim leased
-- (lease_due's), claim_gate and claim_gate_until, the gate it saw ('' when
-- none was asked); results, one per completion, in order:
--   {error = message} when its completion raised an error (see Isolation);
--   {state = 'stale'} when the token is not the callout's current lease
--   (nothing changed), else
--   {state, opened, closed, began, ended (outage), notify, failures,
--    outage_at (ms), probe, attempts, reason (dead letter), gate,
--    last_status, last_error, held (the waiting callouts of this queue the
--    result shut the gate on), shut (1: this result shut the gate), with
--    gate_until (ms) and level (the partition whose gate it is, '' the
--    endpoint's) then: the caller parks the waiting callouts that gate now
--    holds (hold/lua/park.lua)}: the state and reason are this script's
--   decision (it may turn a retry into a dead letter endpoint_disabled),
--   the gate what holds a held callout; callers read them and derive
--   nothing. A field whose value is 0 or '' is left out (compact).
local due, lease, acc = K.due, K.lease, K.counters
local dl, dlb, sfo, sfx = K.dl, K.dlb, K.sfo, K.sfx

-- compact drops the name/value pairs of the flat list t whose value is 0
-- or '' (the reply decoder reads an absent name as its zero value): a
-- success's result is 4 pairs instead of 16, fewer reply items for the
-- replica to read (each a string it allocates).
local function compact(t)
  local out = {}
  for i = 1, #t, 2 do
    local v = t[i + 1]
    if v ~= 0 and v ~= '' then
      out[#out + 1] = t[i]
      out[#out + 1] = v
    end
  end
  return out
end

-- complete_one applies one completion: keys are its keys (c q r res
-- replayed, and the queue's dl dlb), e its arguments (A.items[i]); fa is the counters hash in memory (writes noted in wa),
-- seen the fields of it read so far (hmore).
local function complete_one(keys, e, fa, wa, seen, mark)
  local outbox = e.outbox
  local now = clock(e.now)
  local now_s = str(now)
  local id, token, action, reason, given = e.id, e.token, e.action, e.reason, e.gate

  local rec = hall(keys.c)
  if rec.S ~= 'f' or rec.t ~= token then return {'state', 'stale'} end
  local wc = {}
  local tag = rec.i or ''
  local names = counter_names(tag)
  local part = e.part
  if given == '' then names = concat(names, gate_fields_of(part), breaker_fields_of(part)) end
  hmore(acc, fa, seen, names)
  -- Begin's first attempt, ending before its lease: its reservation already
  -- has the TTL it needs (create.lua).
  local res_timed = rec.d ~= '1' and rec.n == '1' and now <= num(rec.x)
  local dispatched, scheduled = e.attempt ~= '', rec.d == '1'
  local n, charged = num(rec.n), 0
  if dispatched then
    put(rec, wc, 'A' .. str(n), e.attempt)
    charged = #e.attempt + 1
  else
    n = n - 1
    put(rec, wc, 'n', str(n))
  end
  -- the last response: inline chunks r1 … r4, or the key :r when longer
  local resp, resp_long = e.response, false
  local old_long = present(rec.R) and chunks_len(rec, resp_fields) == 0
  if e.status ~= '' then
    local before = chunks_len(rec, resp_fields)
    if old_long then before = redis.call('STRLEN', keys.r) end
    put(rec, wc, 'R', e.status)
    if put_chunks(rec, wc, resp_fields, resp) then
      if old_long then redis.call('DEL', keys.r) end
      old_long = false
    else
      for _, f in ipairs(resp_fields) do blank(rec, wc, f) end
      resp_long = true
    end
    charged = charged + #resp - before
  end
  if e.error ~= '' then
    put(rec, wc, 'e', e.error)
  elseif dispatched then
    blank(rec, wc, 'e')
  end
  put(rec, wc, 'b', str(num(rec.b) + charged))
  acc_add(fa, wa, tag, charged, 0)

  local g0, u0 = gate_in(fa, given, e.gate_until, now, part)
  local e0, eu0 = nil, 0
  if given == '' then e0, eu0 = gate_of(fa, now, '') end
  local probe = nil
  if given == '' then probe = probe_of(fa, token, part) end
  local is_probe = probe ~= nil
  local opened, closed, began, ended = 0, 0, 0, 0
  if given == '' then
    if dispatched then
      opened, closed, began, ended = breaker_apply(fa, wa, now_s, probe, e.success,
        e.counts, e.threshold, str(now + e.probe_in), part, e.quorum)
    elseif is_probe then
      probe_release(fa, wa, probe)
    end
    pause_apply(fa, wa, now, e.pause)
  end

  local g, g_until, level = gate_in(fa, given, e.gate_until, now, part)
  local held = newly_held(due, g0, g)
  local shut_now, shut_until, shut_level = shut_by(fa, now, part, e0, eu0, g0, u0, g, g_until, level)
  if g == 'disabled' and (action == 'retry' or action == 'again') then
    action, reason = 'dead', 'endpoint_disabled'
  end
  if action == 'again' and g ~= 'open' then action = 'again_refused' end

  -- keep_response writes a long response to :r, with the TTL ttl when the
  -- callout ends (false: none); keys.r is then the key expire must still
  -- expire (the record key when none).
  local function keep_response(ttl)
    if resp_long then
      if ttl then
        redis.call('SET', keys.r, resp, 'PX', ttl)
      else
        redis.call('SET', keys.r, resp)
      end
    end
    if not ((resp_long and not ttl) or old_long) then keys.r = keys.c end
  end

  local state, notify = action, 0
  if action == 'again' then
    state = 'in_flight'
    local lease_until = str(now + e.lease)
    redis.call('ZADD', lease, lease_until, id)
    put(rec, wc, 'n', str(n + 1))
    put(rec, wc, 'x', lease_until)
    put(rec, wc, 'l', now_s)
    put(rec, wc, 'k', 'r')
    keep_response(false)
    hflush(keys.c, wc)
    mark.written = true
  elseif action == 'retry' or action == 'again_refused' then
    local at_ms, code
    state, at_ms, code = holds(shut(g), g_until, now + e.due_in)
    local at = str(at_ms)
    redis.call('ZREM', lease, id)
    redis.call('ZADD', due, at, id)
    put(rec, wc, 'S', code)
    for _, l in ipairs(lease_fields) do blank(rec, wc, l) end
    keep_response(false)
    hflush(keys.c, wc)
    mark.written = true
    -- pending again: its reservation lives as long as it does
    if keys.res ~= keys.c and not scheduled then redis.call('PERSIST', keys.res) end
  elseif action == 'dead' then
    state = 'dead_lettered'
    redis.call('ZREM', lease, id)
    keep_response(false)
    dead_letter(keys, rec, wc, fa, wa, id, reason, now_s, e.dead_ttl, str(now - e.dead_ttl),
      function(names) hmore(acc, fa, seen, names) end)
    mark.written = true
    if outbox then
      -- 'd' marks a callout a dispatcher claimed: only those were scheduled
      -- and publish a completion event (contract §8).
      outbox_dead_letter(keys.c, sfo, sfx, id, now_s, e.dead_ttl, scheduled)
    end
    if given == '' then
      -- a sharded endpoint's other queues: notify.lua, on the endpoint hash
      local box = ''
      if outbox then box = sfo end
      notify = owner_notice(fa, wa, box, e.endpoint, id, now_s, reason, e.notify)
    end
  else
    redis.call('ZREM', lease, id)
    keep_response(e.finished_ttl)
    if res_timed then keys.res = keys.c end
    finish(keys, rec, wc, fa, wa, st_code[action], now_s, e.finished_ttl)
    mark.written = true
    if outbox and action == 'succeeded' and scheduled then
      redis.call('ZADD', sfo, 'NX', now_s, 'e:' .. id)
    end
  end

  -- A replay chain that ended tells the dead letter it replays, when it is
  -- still that dead letter's latest replay (rb): 'rx' its final state, 'rxt'
  -- when (contract §8 Reprocessed / Failed Again; calloutctl's REPLAY column).
  local replayed = keys.replayed
  if replayed and replayed ~= keys.c and (state == 'succeeded' or state == 'failed' or state == 'dead_lettered')
      and redis.call('HGET', replayed, 'rb') == id then
    redis.call('HSET', replayed, 'rx', state, 'rxt', now_s)
  end

  local was_probe = 0
  if is_probe then was_probe = 1 end
  local failures = num(fa.cf)
  if part ~= '' then failures = num(fa[pf('cf', part)]) end
  local why = ''
  if state == 'dead_lettered' then why = reason end
  if state == 'in_flight' then n = n + 1 end
  return compact({'state', state, 'opened', opened, 'closed', closed, 'began', began, 'ended', ended,
    'notify', notify, 'failures', failures, 'outage_at', num(fa.os), 'probe', was_probe, 'attempts', n,
    'reason', why, 'gate', g, 'last_status', num(rec.R), 'last_error', rec.e or '', 'held', held,
    'shut', shut_now and 1 or 0, 'gate_until', shut_until, 'level', shut_level})
end

-- copy returns a shallow copy of table t.
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local out, fa, wa, seen = {}, {}, {}, {}
for i, e in ipairs(A.items) do
  local keys = {c = e.record, q = e.rest, r = e.resp, res = e.reservation, replayed = e.replayed, dl = dl, dlb = dlb}
  local fa0, wa0, dirty0 = copy(fa), copy(wa), gate_dirty
  local mark = {}
  local ok, r = pcall(complete_one, keys, e, fa, wa, seen, mark)
  if ok then
    out[i] = r
  else
    if type(r) == 'table' then r = r.err end
    out[i] = {'error', tostring(r)}
    -- once its record is written (finished, rescheduled or dead), its
    -- counter and breaker changes stand with it, or the charge (and a
    -- probe's token) would outlive a callout no reaper will find
    if not mark.written then
      -- as if it had not run: fields it read first are read again by the next
      for n in pairs(seen) do
        if fa0[n] == nil then seen[n] = nil end
      end
      fa, wa, gate_dirty = fa0, wa0, dirty0
    end
  end
end
-- The next claim of this queue, in the same call (Completer.CompleteAndClaim
-- has its rules): after every completion above, behind the gate they left,
-- only when it is open; a sharded endpoint's queue acts on claim_gate.
local claimed, cg, cg_until = {}, '', 0
if A.claim_want > 0 then
  local now = clock(A.claim_now)
  local part, given = A.claim_part, A.claim_gate
  if given == '' then hmore(acc, fa, seen, gate_fields_of(part)) end
  cg, cg_until = gate_in(fa, given, A.claim_gate_until, now, part)
  if cg == 'open' then
    claimed = claim_due(due, lease, A.claim_prefix, A.claim_token, A.claim_want, now, A.claim_lease)
  end
end
hflush(acc, wa)
gate_publish(acc)
return {'results', out, 'claimed', claimed, 'claim_gate', cg, 'claim_gate_until', cg_until}
