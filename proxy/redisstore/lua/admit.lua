-- admit.lua: the gate check for a request that has no callout record (a
-- read, contract §4). When the breaker is half-open and the probe token free,
-- this request takes it and is the probe (contract §6: "the first request or
-- held callout that takes the single probe token").
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 now ms, 2 probe token, 3 probe token until ms
-- Returns {gate, gate_until, failures}; gate 'probe' when the token was taken.
local ep = KEYS[1]
local g, g_until = gate(ep, tonumber(ARGV[1]))
if g == 'half_open' then
  redis.call('HSET', ep, 'pt', ARGV[2], 'pe', ARGV[3])
  g = 'probe'
end
return {g, g_until, num(redis.call('HGET', ep, 'cf'))}
