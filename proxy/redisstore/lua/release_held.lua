-- release_held.lua: make held callouts due now, after an admin reset the
-- breaker or re-enabled the endpoint (a held callout's due time is when its
-- gate was to reopen; the gate is open now). Callouts waiting for a backoff
-- (state scheduled) keep their due time.
--
-- K and A: releaseHeldArgs (release_held.go), read by the script layer
-- (script/): K.due; A.now (lib.lua clock); A.callouts, each with its key record and
-- its id.
-- Replies (countReply): n, how many were released.
local due, now = K.due, str(clock(A.now))
local n = 0
for _, c in ipairs(A.callouts) do
  if redis.call('HGET', c.record, 'S') == 'h' and redis.call('ZSCORE', due, c.id) then
    redis.call('ZADD', due, now, c.id)
    redis.call('HSET', c.record, 'S', 's')
    n = n + 1
  end
end
return {'n', n}
