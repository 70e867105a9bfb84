-- create.lua: create a layout-2 callout (keys.go) — Begin's, leased at once
-- to the synchronous ingress, or Enqueue's, scheduled for the dispatcher —
-- in one script with its idempotency reservation (contract §5), the gate and
-- the backlog caps (contract §10).
--
-- KEYS: 1 record, 2 its :q (headers and body when not inline), 3 due,
--       4 lease, 5 counters (the endpoint hash, or the queue's counter
--       hash), 6 reservation, 7 legacy reservation (6 and 7: the record key
--       as a placeholder when there is none), 8.. the legacy due and lease
--       sets (home queue only), counted while 'L' is not '0'
-- ARGV: 1 now ms, 2 mode 'b' (Begin) | 'e' (Enqueue) | 'd' (Enqueue's dry
--       run: every check, then the answer, nothing written), 3 id,
--       4 reservation value (raw id, 16 bytes, then raw fingerprint, 12),
--       5 stale raw id, 6 stale id (a reservation held by it counts as free),
--       7 takeover raw id, 8 takeover id (the dead letter a replay
--       replaces; '' none), 9–12 caps: items, bytes, items per issuer,
--       bytes per issuer (0: none), 13 issuer tag, 14 gate ('' read it from
--       KEYS[5]; else the state the caller read, sharded queues: 'probe'
--       when it took the probe token), 15 its until ms, 16 due ms (Enqueue)
--       | lease until ms (Begin), 17 probe token until ms, 18 lease token,
--       19 headers and body for :q ('' when inline), 20 wake channel (''
--       none), 21 idempotency retention ms, 22.. the record's field/value
--       pairs
-- Begin's reservation gets the TTL lease + retention at once (SET … PX): a first attempt that ends in time needs no other write to it
-- (complete.lua); one that does not, or is reaped, resets it.
-- Returns one of:
--   {'exists', raw id, raw fingerprint, '2'}   a layout-2 reservation
--   {'exists', id, fingerprint, '1'}           a legacy one
--   {'disabled'}, {'backlog_full'}, {'issuer_backlog_full'}  nothing created
--   {'created', 'in_flight', kind, lease until}   Begin; kind first or probe
--   {'created', state, gate, due}                 held, or Enqueue's scheduled
--   {'would_create', state, gate, due}            mode 'd': what Enqueue would do
-- A replay job's dry run asks in mode 'd', so that it and the real run apply
-- the same reservation, gate and cap rules (one copy).
local c, q, due, lease, acc, res, lres = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local now_s = ARGV[1]
local now = tonumber(now_s)
local begin, id = ARGV[2] == 'b', ARGV[3]
local tag, given = ARGV[13], ARGV[14]

local names = counter_names(tag)
if given == '' then names = concat(names, gate_fields, {'L', 'Lr'}) end
local f, w = hread(acc, names), {}

-- The reservation is taken by the one write that takes it (SET … NX GET,
-- Redis 7.0+), after every check: a path that ends without writing (a
-- refusal, the dry run) looks it up first (existing), so an existing key
-- still answers before the gate and the caps, as it always has.
local keyed = res ~= c
-- other: the 'exists' reply for the layout-2 reservation value v, or nil
-- when v is free (absent, or held by the stale or the takeover callout).
local function other(v)
  if not v then return nil end
  local holder = string.sub(v, 1, 16)
  if holder ~= ARGV[5] and holder ~= ARGV[7] then
    return {'exists', holder, string.sub(v, 17), '2'}
  end
  return nil
end
local function existing()
  if not keyed then return nil end
  return other(redis.call('GET', res))
end
-- A legacy reservation may exist until 'Lr' (keys.go, claim.go).
local drop_legacy = false
if lres ~= c and not (f.Lr and num(f.Lr) < now) then
  local cur = redis.call('HMGET', lres, 'id', 'fp')
  if cur[1] then
    if cur[1] ~= ARGV[6] and cur[1] ~= ARGV[8] then
      return existing() or {'exists', cur[1], cur[2], '1'}
    end
    drop_legacy = true
  end
end

local g, g_until = gate_in(f, given, ARGV[15], now)
if g == 'disabled' then return existing() or {'disabled'} end

local items = num(f.bi)
if tonumber(ARGV[9]) > 0 and f.L ~= '0' then
  local sets = {}
  for i = 8, #KEYS do sets[#sets + 1] = KEYS[i] end
  items = items + pending_items(sets)
end
local size = record_overhead + #ARGV[19]
for i = 22, #ARGV do size = size + #ARGV[i] end
local full = over_caps(f, items, {tonumber(ARGV[9]), tonumber(ARGV[10]),
  tonumber(ARGV[11]), tonumber(ARGV[12])}, size, tag)
if full then return existing() or {full} end
if ARGV[2] == 'd' then
  local e = existing()
  if e then return e end
  local state, at = 'scheduled', ARGV[16]
  if shut(g) then
    state = 'held'
    if g_until > tonumber(at) then at = str(g_until) end
  end
  return {'would_create', state, g, at}
end

local rec = {unpack(ARGV, 22)}
local function field(n, v) rec[#rec + 1] = n; rec[#rec + 1] = v end
field('b', str(size))
if tag ~= '' then field('i', tag) end

local state, out2, at = 'scheduled', g, ARGV[16]
if shut(g) then
  state = 'held'
  if begin or g_until > tonumber(at) then at = str(g_until) end
elseif begin then
  state, out2 = 'in_flight', 'first'
  if g == 'half_open' and given == '' then
    put(f, w, 'pt', ARGV[18])
    put(f, w, 'pe', ARGV[17])
    out2 = 'probe'
  elseif g == 'probe' then
    out2 = 'probe' -- a sharded queue: the caller took the probe token
  end
  field('n', '1')
  field('a', now_s)
  field('t', ARGV[18])
  field('x', at)
  field('l', now_s)
  field('k', kind_code[out2])
end

if keyed then
  -- Begin's reservation gets the TTL lease + retention at once (header).
  local set = {'SET', res, ARGV[4]}
  if state == 'in_flight' then set = {'SET', res, ARGV[4], 'PX', str(tonumber(at) - now + tonumber(ARGV[21]))} end
  local old = redis.call(set[1], set[2], set[3], 'NX', 'GET', unpack(set, 4))
  if old then
    local e = other(old)
    if e then return e end -- nothing written
    redis.call(unpack(set)) -- the stale or takeover holder's: take it over
  end
end

if ARGV[19] ~= '' then
  field('Q', '1')
  redis.call('SET', q, ARGV[19])
end
-- Every pending callout is charged, Begin's synchronous attempt in flight
-- too: one organisation's writes hanging at its upstream then fill only
-- its own share (docs/limits.md).
acc_add(f, w, tag, size, 1)
if drop_legacy then redis.call('DEL', lres) end
field('S', st_code[state])
redis.call('HSET', c, unpack(rec))
if state == 'in_flight' then
  redis.call('ZADD', lease, at, id)
else
  -- Wake the dispatchers (pub/sub, dispatch.Dispatcher) when this is the
  -- first callout due in a queue that held none pending: others there
  -- have woken them already, or they know when those are due.
  if ARGV[20] ~= '' and state == 'scheduled' and tonumber(at) <= now and items == 0 then
    redis.call('PUBLISH', ARGV[20], ARGV[3])
  end
  redis.call('ZADD', due, at, id)
end
hflush(acc, w)
return {'created', state, out2, at}
