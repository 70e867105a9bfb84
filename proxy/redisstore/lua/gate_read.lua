-- gate_read.lua: an endpoint's gate and breaker state at now, computed by
-- lib.lua's gate_of() and breaker_state() — the one owner of the rule — for
-- Go readers (EndpointState, Get, the gate view of sharded queues, ReadGates
-- for the gate cache) that must not compute it themselves.
--
-- K and A: gateReadArgs (endpoint.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash); A.now (lib.lua clock).
-- Replies (gateReadReply): gate, gate_until (ms, 0: none), breaker
-- (closed|open|half_open), failures (consecutive).
local now = clock(A.now)
local f = hread(K.endpoint, {'dis', 'pu', 'bs', 'pa', 'pt', 'pe', 'cf'})
local g, u = gate_of(f, now)
return {'gate', g, 'gate_until', u, 'breaker', breaker_state(f.bs, f.pa, now), 'failures', num(f.cf)}
