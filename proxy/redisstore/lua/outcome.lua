-- outcome.lua: apply the result of a request that has no callout record (a
-- read, or an attempt of a queue of a sharded endpoint, keys.go) to the
-- endpoint's circuit breaker and pause, as complete.lua does for callouts of
-- the endpoint hash's own slot (contract §6).
--
-- KEYS: 1 endpoint hash, 2 (optional) the endpoint's home due set, whose
--       waiting callouts a result that shuts the gate holds
-- ARGV: 1 now ms, 2 probe token ('' when not the probe), 3 success '1'|'0',
--       4 counts toward the breaker '1'|'0', 5 breaker threshold,
--       6 probe time if the breaker (re)opens (ms), 7 paused until ms (0: none)
-- Returns {opened, closed, outage_began, outage_ended, failures, outage_started_ms, probe,
--   newly held (the home queue's waiting callouts this result shut the gate on), gate}
local ep = KEYS[1]
local now = tonumber(ARGV[1])
local f, w = hread(ep, concat(breaker_fields, {'pu', 'dis'})), {}
local g0 = gate_of(f, now)
local is_probe = ARGV[2] ~= '' and f.pt == ARGV[2]
local opened, closed, began, ended = breaker_apply(f, w, ARGV[1], is_probe, ARGV[3] == '1',
  ARGV[4] == '1', tonumber(ARGV[5]), ARGV[6])
pause_apply(f, w, ARGV[7])
hflush(ep, w)
gate_publish(ep)
local g1 = gate_of(f, now)
local held = 0
if KEYS[2] then held = newly_held(KEYS[2], g0, g1) end
local probe = 0
if is_probe then probe = 1 end
return {opened, closed, began, ended, num(f.cf), num(f.os), probe, held, g1}
