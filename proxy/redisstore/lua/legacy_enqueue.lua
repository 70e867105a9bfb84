-- enqueue.lua: create a callout whose first attempt the dispatcher makes:
-- `scheduled` at a due time, or `held` when the gate is shut (breaker open,
-- probe out, endpoint paused). Same idempotency and cap checks as begin.lua.
-- A replay chain (contract §8) takes over the reservation held by the dead
-- letter it replays.
--
-- KEYS: 1 callout record, 2 its body, 3 due, 4 lease, 5 endpoint hash,
--       6 idempotency key (optional)
-- ARGV: 1 now ms, 2 id, 3 fingerprint, 4 body, 5 max items (0: no cap),
--       6 max bytes (0: no cap), 7 max items per issuer, 8 max bytes per
--       issuer (0: no cap), 9 issuer tag, 10 due ms, 11 replay_of id or '',
--       12 stale id (a reservation held by it counts as free),
--       13.. the request's field/value pairs
-- Returns one of:
--   {'exists', id, fingerprint}, {'disabled'}, {'backlog_full'}, {'issuer_backlog_full'}
--   {'created', state, gate, due}            state 'scheduled' or 'held'
local c, b, due, lease, ep, idem = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = tonumber(ARGV[1])
local id, fp, body = ARGV[2], ARGV[3], ARGV[4]

local ex = idem_lookup(idem, ARGV[12], ARGV[11])
if ex then return {'exists', ex[1], ex[2]} end
local g, g_until = gate(ep, now)
if g == 'disabled' then return {'disabled'} end
local tag = ARGV[9]
local full = backlog_full(due, lease, ep,
  {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])}, stored_size(body, 13), tag)
if full then return {full} end

create(c, b, ep, idem, id, fp, body, 13, tag)
local state, at = 'scheduled', ARGV[10]
if shut(g) then
  state = 'held'
  if g_until > tonumber(at) then at = str(g_until) end
end
redis.call('HSET', c, 's', state, 'na', at)
redis.call('ZADD', due, at, id)
return {'created', state, g, at}
