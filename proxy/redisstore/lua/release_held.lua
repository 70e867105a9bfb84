-- release_held.lua: make held callouts due now, after an admin reset the
-- breaker or re-enabled the endpoint (a held callout's due time is when its
-- gate was to reopen; the gate is open now). Callouts waiting for a backoff
-- (state scheduled) keep their due time.
--
-- KEYS: 1 due set (legacy or layout 2), then for each candidate: its record
--       (either layout, keys.go)
-- ARGV: 1 now (ms), then the candidates' ids in KEYS order
-- Returns how many were released.
local due, now = KEYS[1], ARGV[1]
local n = 0
for i = 2, #KEYS do
  local id = ARGV[i]
  local f = redis.call('HMGET', KEYS[i], 's', 'S')
  if (f[1] == 'held' or f[2] == 'h') and redis.call('ZSCORE', due, id) then
    redis.call('ZADD', due, now, id)
    if f[2] then
      redis.call('HSET', KEYS[i], 'S', 's')
    else
      redis.call('HSET', KEYS[i], 's', 'scheduled', 'na', now)
    end
    n = n + 1
  end
end
return n
