-- admit.lua: the gate check for a request that has no callout record (a
-- read, contract §4). When the breaker is half-open and the probe token free,
-- this request takes it and is the probe (contract §6: "the first request or
-- held callout that takes the single probe token").
--
-- K and A: admitArgs (gate.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash); A.now (lib.lua clock), A.token (the probe
-- token this request takes if it can), A.probe_lease (ms it is held at most),
-- A.part (the breaker partition of the caller's organisation, '' the
-- endpoint's, contract §6: the probe is taken from the partition it tests).
-- Replies (admitReply): gate ('probe' when the token was taken),
-- gate_until (ms), level (the partition whose breaker the gate is, '' the
-- endpoint's), failures (the endpoint's consecutive failures, or the
-- partition's when it has more: a success must be recorded while either
-- is not 0).
local ep, part = K.endpoint, A.part
local now = clock(A.now)
local f = hread(ep, concat(gate_fields_of(part), {'cf', pf('cf', part)}))
local g, g_until, level = gate_of(f, now, part)
if g == 'half_open' then
  redis.call('HSET', ep, pf('pt', level), A.token, pf('pe', level), str(now + A.probe_lease))
  g = 'probe'
end
return {'gate', g, 'gate_until', g_until, 'level', level, 'failures', math.max(num(f.cf), num(f[pf('cf', part)]))}
