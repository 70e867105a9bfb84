-- begin.lua: create a callout for the synchronous ingress and lease its
-- first attempt to the caller. It IS the idempotency reservation (contract §5).
--
-- KEYS: 1 callout record, 2 its body, 3 due, 4 lease, 5 endpoint hash,
--       6 idempotency key (optional)
-- ARGV: 1 now ms, 2 id, 3 fingerprint, 4 body, 5 max items (0: no cap),
--       6 max bytes (0: no cap), 7 max items per issuer, 8 max bytes per
--       issuer (0: no cap), 9 issuer tag, 10 lease until ms, 11 probe token
--       until ms, 12 lease token, 13 stale id (a reservation held by it
--       counts as free), 14.. the request's field/value pairs
-- Returns one of:
--   {'exists', id, fingerprint}              reserved by callout id; nothing created
--   {'disabled'}, {'backlog_full'}, {'issuer_backlog_full'}  nothing created
--   {'created', 'in_flight', kind, lease_until}  kind 'first', or 'probe' when
--                                            this request took the probe token
--   {'created', 'held', gate, due}           the gate is shut; held until due
local c, b, due, lease, ep, idem = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now_s = ARGV[1]
local now = tonumber(now_s)
local id, fp, body = ARGV[2], ARGV[3], ARGV[4]

local ex = idem_lookup(idem, ARGV[13], '')
if ex then return {'exists', ex[1], ex[2]} end
local g, g_until = gate(ep, now)
if g == 'disabled' then return {'disabled'} end
local tag = ARGV[9]
local full = backlog_full(due, lease, ep,
  {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])}, stored_size(body, 14), tag)
if full then return {full} end

create(c, b, ep, idem, id, fp, body, 14, tag)
if shut(g) then
  local at = str(g_until)
  redis.call('HSET', c, 's', 'held', 'na', at)
  redis.call('ZADD', due, at, id)
  return {'created', 'held', g, at}
end
local kind = 'first'
if g == 'half_open' then
  kind = 'probe'
  redis.call('HSET', ep, 'pt', ARGV[12], 'pe', ARGV[11])
end
redis.call('HSET', c, 's', 'in_flight', 'n', '1', 'fa', now_s, 'lt', ARGV[12],
  'lx', ARGV[10], 'ls', now_s, 'lk', kind)
redis.call('ZADD', lease, ARGV[10], id)
return {'created', 'in_flight', kind, ARGV[10]}
