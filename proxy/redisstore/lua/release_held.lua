-- release_held.lua: make held callouts due now, after an admin reset the
-- breaker or re-enabled the endpoint (a held callout's due time is when its
-- gate was to reopen; the gate is open now). Callouts waiting for a backoff
-- (state scheduled) keep their due time, and so do those whose durable
-- acknowledgement is still out (create.lua's field w, a Redis-clock ms).
--
-- K and A: releaseHeldArgs (release_held.go), read by the script layer
-- (script/): K.due; A.now (lib.lua clock); A.callouts, each with its key record and
-- its id.
-- Replies (countReply): n, how many were released.
local due, now = K.due, str(clock(A.now))
local n = 0
for _, c in ipairs(A.callouts) do
  local r = redis.call('HMGET', c.record, 'S', 'w')
  -- One whose durable acknowledgement is out (create.lua, field w) stays
  -- parked: its caller may yet be answered 503 and it withdrawn
  -- (contract §11). It is due at its gate's old reopening, or when the
  -- hold ends.
  if r[1] == 'h' and (tonumber(r[2] or 0) or 0) <= tonumber(now) and redis.call('ZSCORE', due, c.id) then
    redis.call('ZADD', due, now, c.id)
    redis.call('HSET', c.record, 'S', 's')
    n = n + 1
  end
end
return {'n', n}
