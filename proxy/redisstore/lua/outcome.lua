-- outcome.lua: apply the result of a request that has no callout record (a
-- read) to the endpoint's circuit breaker and pause, as complete.lua does
-- for callouts (SPEC §6).
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 now ms, 2 probe token ('' when not the probe), 3 success '1'|'0',
--       4 counts toward the breaker '1'|'0', 5 breaker threshold,
--       6 probe time if the breaker (re)opens (ms), 7 paused until ms (0: none)
-- Returns {opened, closed, outage_began, outage_ended, failures, outage_started_ms, probe}
local ep = KEYS[1]
local is_probe = ARGV[2] ~= '' and redis.call('HGET', ep, 'pt') == ARGV[2]
local opened, closed, began, ended = breaker_update(ep, ARGV[1], is_probe, ARGV[3] == '1',
  ARGV[4] == '1', tonumber(ARGV[5]), ARGV[6])
pause(ep, ARGV[7])
local e = redis.call('HMGET', ep, 'cf', 'os')
local probe = 0
if is_probe then probe = 1 end
return {opened, closed, began, ended, num(e[1]), num(e[2]), probe}
