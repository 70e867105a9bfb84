-- release_held.lua: make held callouts due now, after an admin reset the
-- breaker or re-enabled the endpoint (a held callout's due time is when its
-- gate was to reopen; the gate is open now). Callouts waiting for a backoff
-- (state scheduled) keep their due time.
--
-- KEYS: 1 due set, then for each candidate: its record (keys.go)
-- ARGV: 1 now (ms), then the candidates' ids in KEYS order
-- Returns how many were released.
local due, now = KEYS[1], ARGV[1]
local n = 0
for i = 2, #KEYS do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[i], 'S') == 'h' and redis.call('ZSCORE', due, id) then
    redis.call('ZADD', due, now, id)
    redis.call('HSET', KEYS[i], 'S', 's')
    n = n + 1
  end
end
return n
