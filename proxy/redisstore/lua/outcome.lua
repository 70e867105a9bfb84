-- outcome.lua: apply the result of a request that has no callout record (a
-- read, or an attempt of a queue of a sharded endpoint, keyspace) to the
-- endpoint's circuit breaker and pause, as complete.lua does for callouts of
-- the endpoint hash's own slot (contract §6).
--
-- K and A: outcomeArgs (gate.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash), K.due (none, or the endpoint's home due
-- set, whose waiting callouts a result that shuts the gate holds); A.now
-- (lib.lua clock), A.probe (the probe token, '' when not the probe), A.success, A.counts
-- (toward the breaker), A.threshold, A.probe_in (ms from now to the
-- next probe, if the breaker (re)opens), A.pause (ms from now the endpoint
-- pauses for, 0: none), A.part (the breaker partition, '' the endpoint's,
-- contract §6), A.quorum (open partitions that open the endpoint's own
-- breaker; 0: lib.lua's default).
-- Replies (outcomeReply): opened, closed, began, ended (the outage),
-- failures, outage_at (ms), probe, held (the home queue's waiting callouts
-- this result shut the gate on), gate, shut (1: this result shut the
-- gate: the caller parks the waiting callouts it now holds, hold/lua/park.lua),
-- gate_until (ms) and level (the partition whose gate it is, '' the
-- endpoint's).
local ep = K.endpoint
local now = clock(A.now)
local part = A.part
local f, w = hread(ep, concat(breaker_fields_of(part), {'pu', 'dis'})), {}
local g0, u0 = gate_of(f, now, part)
local e0, eu0 = gate_of(f, now, '')
local probe = probe_of(f, A.probe, part)
local is_probe = probe ~= nil
local opened, closed, began, ended = breaker_apply(f, w, str(now), probe, A.success,
  A.counts, A.threshold, str(now + A.probe_in), part, A.quorum)
pause_apply(f, w, now, A.pause)
hflush(ep, w)
gate_publish(ep)
local g1, g1_until, level = gate_of(f, now, part)
local held = 0
for _, d in ipairs(K.due) do held = held + newly_held(d, g0, g1) end
local shut_now, shut_until, shut_level = shut_by(f, now, part, e0, eu0, g0, u0, g1, g1_until, level)
local failures = num(f.cf)
if part ~= '' then failures = num(f[pf('cf', part)]) end
local probe = 0
if is_probe then probe = 1 end
return {'opened', opened, 'closed', closed, 'began', began, 'ended', ended, 'failures', failures,
  'outage_at', num(f.os), 'probe', probe, 'held', held, 'gate', g1,
  'shut', shut_now and 1 or 0, 'gate_until', shut_until, 'level', shut_level}
