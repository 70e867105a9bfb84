-- create.lua: create a callout (keys.go) — Begin's, leased at once to the
-- synchronous ingress, or Enqueue's, scheduled for the dispatcher — in one
-- script with its idempotency reservation (contract §5), the gate and the
-- backlog caps (contract §10).
--
-- KEYS: 1 record, 2 its :q (headers and body when not inline), 3 due,
--       4 lease, 5 counters (the endpoint hash, or the queue's counter
--       hash), 6 reservation (the record key as a placeholder when there
--       is none)
-- ARGV: 1 now ms, 2 mode 'b' (Begin) | 'e' (Enqueue) | 'd' (Enqueue's dry
--       run: every check, then the answer, nothing written), 3 id,
--       4 reservation value (raw id, 16 bytes, then raw fingerprint, 12),
--       5 stale raw id (a reservation held by it counts as free),
--       6 takeover raw id (the dead letter a replay replaces; '' none),
--       7–10 caps: items, bytes, items per issuer, bytes per issuer (0:
--       none), 11 issuer tag, 12 gate ('' read it from KEYS[5]; else the
--       state the caller read, sharded queues: 'probe' when it took the
--       probe token), 13 its until ms, 14 due ms (Enqueue) | lease until ms
--       (Begin), 15 probe token until ms, 16 lease token, 17 headers and
--       body for :q ('' when inline), 18 wake channel ('' none),
--       19 idempotency retention ms, 20.. the record's field/value pairs
-- Begin's reservation gets the TTL lease + retention at once (SET … PX): a
-- first attempt that ends in time needs no other write to it
-- (complete.lua); one that does not, or is reaped, resets it.
-- Returns one of:
--   {'exists', raw id, raw fingerprint}   the key's reservation is another's
--   {'disabled'}, {'backlog_full'}, {'issuer_backlog_full'}  nothing created
--   {'created', 'in_flight', kind, lease until}   Begin; kind first or probe
--   {'created', state, gate, due}                 held, or Enqueue's scheduled
--   {'would_create', state, gate, due}            mode 'd': what Enqueue would do
-- A replay job's dry run asks in mode 'd', so that it and the real run apply
-- the same reservation, gate and cap rules (one copy).
local c, q, due, lease, acc, res = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now_s = ARGV[1]
local now = tonumber(now_s)
local begin, id = ARGV[2] == 'b', ARGV[3]
local tag, given = ARGV[11], ARGV[12]

local names = counter_names(tag)
if given == '' then names = concat(names, gate_fields) end
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
  if holder ~= ARGV[5] and holder ~= ARGV[6] then
    return {'exists', holder, string.sub(v, 17)}
  end
  return nil
end
local function existing()
  if not keyed then return nil end
  return other(redis.call('GET', res))
end
local g, g_until = gate_in(f, given, ARGV[13], now)
if g == 'disabled' then return existing() or {'disabled'} end

local items = num(f.bi)
local size = record_overhead + #ARGV[17]
for i = 20, #ARGV do size = size + #ARGV[i] end
local full = over_caps(f, items, {tonumber(ARGV[7]), tonumber(ARGV[8]),
  tonumber(ARGV[9]), tonumber(ARGV[10])}, size, tag)
if full then return existing() or {full} end
if ARGV[2] == 'd' then
  local e = existing()
  if e then return e end
  local state, at = 'scheduled', ARGV[14]
  if shut(g) then
    state = 'held'
    if g_until > tonumber(at) then at = str(g_until) end
  end
  return {'would_create', state, g, at}
end

local rec = {unpack(ARGV, 20)}
local function field(n, v) rec[#rec + 1] = n; rec[#rec + 1] = v end
field('b', str(size))
if tag ~= '' then field('i', tag) end

local state, out2, at = 'scheduled', g, ARGV[14]
if shut(g) then
  state = 'held'
  if begin or g_until > tonumber(at) then at = str(g_until) end
elseif begin then
  state, out2 = 'in_flight', 'first'
  if g == 'half_open' and given == '' then
    put(f, w, 'pt', ARGV[16])
    put(f, w, 'pe', ARGV[15])
    out2 = 'probe'
  elseif g == 'probe' then
    out2 = 'probe' -- a sharded queue: the caller took the probe token
  end
  field('n', '1')
  field('a', now_s)
  field('t', ARGV[16])
  field('x', at)
  field('l', now_s)
  field('k', kind_code[out2])
end

if keyed then
  -- Begin's reservation gets the TTL lease + retention at once (header).
  local set = {'SET', res, ARGV[4]}
  if state == 'in_flight' then set = {'SET', res, ARGV[4], 'PX', str(tonumber(at) - now + tonumber(ARGV[19]))} end
  local old = redis.call(set[1], set[2], set[3], 'NX', 'GET', unpack(set, 4))
  if old then
    local e = other(old)
    if e then return e end -- nothing written
    redis.call(unpack(set)) -- the stale or takeover holder's: take it over
  end
end

if ARGV[17] ~= '' then
  field('Q', '1')
  redis.call('SET', q, ARGV[17])
end
-- Every pending callout is charged, Begin's synchronous attempt in flight
-- too: one organisation's writes hanging at its upstream then fill only
-- its own share (docs/limits.md).
acc_add(f, w, tag, size, 1)
field('S', st_code[state])
redis.call('HSET', c, unpack(rec))
if state == 'in_flight' then
  redis.call('ZADD', lease, at, id)
else
  -- Wake the dispatchers (pub/sub, dispatch.Dispatcher) when this is the
  -- first callout due in a queue that held none pending: others there
  -- have woken them already, or they know when those are due.
  if ARGV[18] ~= '' and state == 'scheduled' and tonumber(at) <= now and items == 0 then
    redis.call('PUBLISH', ARGV[18], ARGV[3])
  end
  redis.call('ZADD', due, at, id)
end
hflush(acc, w)
return {'created', state, out2, at}
