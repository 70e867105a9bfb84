-- disable.lua: mark an endpoint disabled (contract §6), once: reason and time
-- are written only by the call that disabled it. Its pending callouts are
-- moved to the dead letters afterwards by drain.lua, in bounded batches.
--
-- The owner is notified once per disable (contract §6), when someone is
-- there to tell (Options.Notify): with the Salesforce outbox on, the
-- notification is queued here, in the same script ('d:' endpoint ':' ms,
-- proxy/redisstore/outbox).
--
-- K and A: disableArgs (admin.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash), K.sfo (Salesforce outbox); A.now (lib.lua
-- clock), A.reason, A.name (the endpoint), A.outbox, A.can (someone can be
-- told), A.after (ms; 0: an admin's disable; else auto-disable, contract
-- §6: only when the current outage, the endpoint hash's 'os', began at
-- least that long ago on Redis's clock — the one clock, so a replica whose
-- own clock runs ahead does not disable early).
-- Replies (toldReply): told, 1 when this call disabled it, 0 when it
-- already was; early 1 (nothing written) when auto-disable is not due.
local now = clock(A.now)
if A.after > 0 and redis.call('HGET', K.endpoint, 'dis') ~= '1' then
  local os = tonumber(redis.call('HGET', K.endpoint, 'os') or '')
  if not os or now - os < A.after then return {'told', 0, 'early', 1} end
end
if redis.call('HSETNX', K.endpoint, 'dis', '1') == 0 then return {'told', 0} end
local now_s = str(now)
redis.call('HSET', K.endpoint, 'dr', A.reason, 'dat', now_s)
gate_changed(K.endpoint)
if A.outbox and A.can then
  redis.call('ZADD', K.sfo, 'NX', now_s, 'd:' .. A.name .. ':' .. now_s)
end
return {'told', 1}
