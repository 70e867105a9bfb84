-- claim.lua: lease due callouts of one endpoint to a worker (ARCHITECTURE.md "Redis
-- data model"). Step one, a plain ZRANGEBYSCORE due -inf now LIMIT 0 batch,
-- found the candidates; this script re-checks each, so racing workers never
-- claim one callout twice.
--
-- First the O(1) gate on the endpoint hash: disabled, paused, breaker open
-- before its probe time, or a probe out -> claim nothing and touch no
-- callout. Half-open (probe time reached, token free) -> take the single
-- probe token and claim exactly one callout, kind 'probe'.
--
-- KEYS: 1 due, 2 lease, 3 endpoint hash, then per candidate i:
--       KEYS[2+2i] its record, KEYS[3+2i] its body
-- ARGV: 1 now ms, 2 lease until ms, 3 probe token until ms,
--       then per candidate i: ARGV[2+2i] id, ARGV[3+2i] new lease token
-- Returns {gate, gate_until, claimed...}, each claimed:
--   {id, kind, body or false, due ms, field, value, field, value, ...} (the
--   whole record after the claim, HGETALL order)
local due, lease, ep = KEYS[1], KEYS[2], KEYS[3]
local now_s = ARGV[1]
local now = tonumber(now_s)

local g, g_until = gate(ep, now)
if g ~= 'open' and g ~= 'half_open' then return {g, g_until} end
local out = {g, 0}
for i = 1, (#KEYS - 3) / 2 do
  if g == 'half_open' and #out > 2 then break end
  local c, b, id, token = KEYS[2 + 2 * i], KEYS[3 + 2 * i], ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local score = redis.call('ZSCORE', due, id)
  if score and tonumber(score) <= now then
    local f = redis.call('HMGET', c, 's', 'n', 'ro')
    redis.call('ZREM', due, id)
    if f[1] then
      local n = num(f[2]) + 1
      local kind = 'retry'
      if g == 'half_open' then
        kind = 'probe'
        redis.call('HSET', ep, 'pt', token, 'pe', ARGV[3])
      elseif n == 1 then
        kind = 'first'
        if f[3] then kind = 'replay' end
      end
      redis.call('ZADD', lease, ARGV[2], id)
      -- 'sd': a dispatcher claimed it, so it was scheduled (complete.lua
      -- publishes its completion event, contract §8)
      redis.call('HSET', c, 's', 'in_flight', 'n', str(n), 'lt', token, 'lx', ARGV[2],
        'ls', now_s, 'lk', kind, 'sd', '1')
      redis.call('HSETNX', c, 'fa', now_s)
      redis.call('HDEL', c, 'na')
      out[#out + 1] = {id, kind, redis.call('GET', b), score, unpack(redis.call('HGETALL', c))}
    end
  end
end
return out
