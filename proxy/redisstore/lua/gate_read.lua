-- gate_read.lua: an endpoint's gate and breaker state at now, computed by
-- lib.lua's gate_of() and breaker_state() — the one owner of the rule — for
-- Go readers (EndpointState, Get, the gate view of sharded queues) that
-- must not compute it themselves.
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 now ms
-- Returns {gate, until ms (0: none), breaker: closed|open|half_open,
--   consecutive failures}
local now = tonumber(ARGV[1])
local f = hread(KEYS[1], {'dis', 'pu', 'bs', 'pa', 'pt', 'pe', 'cf'})
local g, u = gate_of(f, now)
return {g, tostring(u), breaker_state(f.bs, f.pa, now), num(f.cf)}
