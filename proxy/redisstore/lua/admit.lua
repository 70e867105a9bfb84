-- admit.lua: the gate check for a request that has no callout record (a
-- read, contract §4). When the breaker is half-open and the probe token free,
-- this request takes it and is the probe (contract §6: "the first request or
-- held callout that takes the single probe token").
--
-- K and A: admitArgs (gate.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash); A.now (lib.lua clock), A.token (the probe
-- token this request takes if it can), A.probe_lease (ms it is held at most).
-- Replies (admitReply): gate ('probe' when the token was taken),
-- gate_until (ms), failures.
local ep = K.endpoint
local now = clock(A.now)
local g, g_until = gate(ep, now)
if g == 'half_open' then
  redis.call('HSET', ep, 'pt', A.token, 'pe', str(now + A.probe_lease))
  g = 'probe'
end
return {'gate', g, 'gate_until', g_until, 'failures', num(redis.call('HGET', ep, 'cf'))}
