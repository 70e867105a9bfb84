-- gate_read.lua: an endpoint's gate and breaker state at now, computed by
-- lib.lua's gate() and breaker_state() — the one owner of the rule — for
-- Go readers (EndpointState, Get, the gate cache's poll) that must not
-- compute it themselves.
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 now ms
-- Returns {gate, until ms (0: none), breaker: closed|open|half_open,
-- consecutive failures}
local now = tonumber(ARGV[1])
local g, u = gate(KEYS[1], now)
local f = redis.call('HMGET', KEYS[1], 'bs', 'pa', 'cf')
return {g, tostring(u), breaker_state(f[1], f[2], now), num(f[3])}
