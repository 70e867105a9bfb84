-- create.lua: create a callout (keyspace) — Begin's, leased at once to the
-- synchronous ingress, or Enqueue's, scheduled for the dispatcher — in one
-- script with its idempotency reservation (contract §5), the gate and the
-- backlog caps (contract §10).
--
-- K and A: createArgs (create.go), read by the script layer (script/):
-- K.record, K.rest (its :q), K.due, K.lease (the organisation queue's,
-- keyspace), K.counters (the endpoint hash, or the queue's counter hash),
-- K.reservation (the record key as a placeholder when there is none); A.mode 'b' (Begin) | 'e' (Enqueue) |
-- 'd' (Enqueue's dry run: every check, then the answer, nothing written),
-- A.id, A.hold (the reservation value: raw id, 16 bytes, then raw
-- fingerprint, 12), A.stale and A.takeover (raw ids whose reservation counts
-- as free: a vanished holder, the dead letter a replay replaces), the caps
-- A.max_items, A.max_bytes, A.max_items_issuer, A.max_bytes_issuer (0:
-- none), A.tag (issuer tag), A.part (the breaker partition, '' or A.tag,
-- contract §6), A.gate ('' read it from K.counters; else the
-- state the caller read, sharded queues: 'probe' when it took the probe
-- token) and A.gate_until, A.at_in (ms from now: Enqueue's due time, Begin's
-- lease), A.probe_lease (ms), A.token (lease token), A.rest_q (headers and body for :q,
-- '' when inline), A.wake (channel, '' none), A.retention (idempotency
-- retention ms), A.fields (the record's field/value pairs, its charge b and
-- issuer tag i included: the script appends only what the gate decides),
-- A.charge (the bytes it is charged, b: record.Charge), A.ack_hold (ms,
-- 0 none: create.go ackHold; the callout is queued that far ahead, wakes
-- nobody and its record says so, field w, until create.go unhold).
-- Begin's reservation gets the TTL lease + retention at once (SET … PX): a
-- first attempt that ends in time needs no other write to it
-- (complete.lua); one that does not, or is reaped, resets it.
-- Replies (createReply): result 'exists' with holder (raw id) and
-- fingerprint (raw); 'disabled', 'backlog_full', 'issuer_backlog_full'
-- (nothing created); 'created' with state (in_flight: kind first or probe;
-- held or scheduled: gate) and at (lease until, or due ms);
-- 'would_create' likewise, mode 'd': what Enqueue would do (a replay job's
-- dry run: one copy of the rules).
local c, q, due, lease, acc, res = K.record, K.rest, K.due, K.lease, K.counters, K.reservation
local now = clock(A.now)
local at_in = now + A.at_in
local now_s = str(now)
local begin, id = A.mode == 'b', A.id
local tag, given, part = A.tag, A.gate, A.part

local names = counter_names(tag)
if given == '' then names = concat(names, gate_fields_of(part)) end
local f, w = hread(acc, names), {}

-- The reservation is taken by the one write that takes it (SET … NX GET,
-- Redis 7.0+), after every check: a path that ends without writing (a
-- refusal, the dry run) looks it up first (existing), so an existing key
-- still answers before the gate and the caps, as it always has.
local keyed = res ~= c
-- other: the 'exists' reply for the reservation value v, or nil
-- when v is free (absent, or held by the stale or the takeover callout).
local function other(v)
  if not v then return nil end
  local holder = string.sub(v, 1, 16)
  if holder ~= A.stale and holder ~= A.takeover then
    return {'result', 'exists', 'holder', holder, 'fingerprint', string.sub(v, 17)}
  end
  return nil
end
local function existing()
  if not keyed then return nil end
  return other(redis.call('GET', res))
end
local g, g_until, level = gate_in(f, given, A.gate_until, now, part)
if g == 'disabled' then return existing() or {'result', 'disabled'} end

local items = num(f.bi)
-- this organisation's pending callouts in the queue, before this one
local mine = items
if tag ~= '' then mine = num(f['ii:' .. tag]) end
local size = A.charge
local full = over_caps(f, items, {A.max_items, A.max_bytes, A.max_items_issuer, A.max_bytes_issuer},
  size, tag)
if full then return existing() or {'result', full} end
if A.mode == 'd' then
  local e = existing()
  if e then return e end
  local state, at = holds(shut(g), g_until, at_in)
  return {'result', 'would_create', 'state', state, 'gate', g, 'at', at}
end

-- The record's fields as Go sent them (a table of this call's own): the
-- script appends what the gate decides.
local rec = A.fields
local function field(n, v) rec[#rec + 1] = n; rec[#rec + 1] = v end

local state, out2, at, code = 'scheduled', g, at_in, 's'
if shut(g) and begin then
  state, at, code = 'held', g_until, 'h' -- at_in was its lease: it waits for the gate
elseif shut(g) then
  state, at, code = holds(true, g_until, at_in)
elseif begin then
  state, out2 = 'in_flight', 'first'
  if g == 'half_open' and given == '' then
    put(f, w, pf('pt', level), A.token)
    put(f, w, pf('pe', level), str(now + A.probe_lease))
    out2 = 'probe'
  elseif g == 'probe' then
    out2 = 'probe' -- a sharded queue: the caller took the probe token
  end
  field('n', '1')
  field('a', now_s)
  field('t', A.token)
  field('x', str(at))
  field('l', now_s)
  field('k', kind_code[out2])
end

if keyed then
  -- Begin's reservation gets the TTL lease + retention at once (header).
  local old
  if state == 'in_flight' then
    local px = str(at - now + A.retention)
    old = redis.call('SET', res, A.hold, 'NX', 'GET', 'PX', px)
    if old then
      local e = other(old)
      if e then return e end -- nothing written
      redis.call('SET', res, A.hold, 'PX', px) -- the stale or takeover holder's: take it over
    end
  else
    old = redis.call('SET', res, A.hold, 'NX', 'GET')
    if old then
      local e = other(old)
      if e then return e end
      redis.call('SET', res, A.hold)
    end
  end
end

if A.rest_q ~= '' then
  field('Q', '1')
  redis.call('SET', q, A.rest_q)
end
-- Every pending callout is charged, Begin's synchronous attempt in flight
-- too: one organisation's writes hanging at its upstream then fill only
-- its own share (docs/limits.md). Written with the probe fields (w) in one
-- HSET: a create only adds, so no counter reaches 0 (acc_add's rule).
local cw = {'bb', str(num(f.bb) + size), 'bi', str(items + 1)}
if tag ~= '' then
  local n = #cw
  cw[n + 1], cw[n + 2] = 'ib:' .. tag, str(num(f['ib:' .. tag]) + size)
  cw[n + 3], cw[n + 4] = 'ii:' .. tag, str(mine + 1)
end
for n, v in pairs(w) do cw[#cw + 1] = n; cw[#cw + 1] = v end
if state == 'in_flight' then code = 'f' end
field('S', code)
-- Awaiting its durable acknowledgement until w (ms): hold/lua/park.lua
-- leaves it parked until then, as the due set does (record.FieldAckHold).
if A.ack_hold > 0 and state ~= 'in_flight' then field('w', str(now + A.ack_hold)) end
redis.call('HSET', c, unpack(rec))
if state == 'in_flight' then
  redis.call('ZADD', lease, str(at), id)
else
  -- Wake the dispatchers (pub/sub, dispatch.Dispatcher) when this is the
  -- first callout due of an organisation that had none pending in the
  -- queue: others there have woken them already, or they know when those
  -- are due (another organisation's pending callouts say nothing of it).
  local score = at
  if A.ack_hold > 0 then
    score = math.max(at, now + A.ack_hold)
  elseif A.wake ~= '' and state == 'scheduled' and at <= now and mine == 0 then
    redis.call('PUBLISH', A.wake, id)
  end
  redis.call('ZADD', due, str(score), id)
end
redis.call('HSET', acc, unpack(cw))
if state == 'in_flight' then
  return {'result', 'created', 'state', state, 'at', at, 'kind', out2}
end
return {'result', 'created', 'state', state, 'at', at, 'gate', out2}
