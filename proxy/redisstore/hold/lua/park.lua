-- park.lua: move one batch of a queue's waiting callouts between scheduled
-- and held, the state their records keep (contract §12 "A callout's
-- state", §6), after the queue's gate changed: the gate is read here
-- (K.counters, or the caller's A.gate and A.gate_until for a queue outside
-- the endpoint hash's slot, as claim.lua's), not taken from whoever changed
-- it, so a batch that comes late changes nothing wrongly.
--
-- hold (A.hold; a result shut the gate, or moved its reopening later):
-- while the gate is shut, each scheduled callout is held (lib.lua holds,
-- the rule create.lua, complete.lua and reap.lua apply to one that meets a
-- shut gate): due when the gate reopens if it was due before (code 'h'),
-- else at its own time ('g'); a held one due before the reopening is due at
-- it.
--
-- release (a result closed the breaker, or an admin reset it or re-enabled
-- the endpoint): while the gate is not shut, each held callout is
-- scheduled: due now when it waited for the reopening ('h' due later than
-- now), at its own time otherwise ('g': its backoff). Those whose durable
-- acknowledgement is still out (create.lua's field w, a Redis-clock ms)
-- stay held: their caller may yet be answered 503 and they withdrawn
-- (contract §11); they are due at the old reopening, or when the hold ends.
--
-- K and A: parkArgs (hold.go), read by the script layer (script/): K.due,
-- K.counters; A.now (lib.lua clock), A.hold, A.part (the breaker
-- partition, '' the endpoint's), A.gate and A.gate_until; A.callouts, each
-- with its key record and its id.
-- Replies (countReply): n, how many changed state.
local due, now = K.due, clock(A.now)
local now_s = str(now)
local f = {}
if A.gate == '' then f = hread(K.counters, gate_fields_of(A.part)) end
local g, reopen = gate_in(f, A.gate, A.gate_until, now, A.part)
if shut(g) ~= A.hold then return {'n', 0} end
local n = 0
for _, c in ipairs(A.callouts) do
  local r = redis.call('HMGET', c.record, 'S', 'w')
  local zs = redis.call('ZSCORE', due, c.id)
  local score = zs and tonumber(zs)
  if score and A.hold and (r[1] == 's' or ((r[1] == 'h' or r[1] == 'g') and score < reopen)) then
    local _, at, code = holds(true, reopen, score)
    if at ~= score then redis.call('ZADD', due, str(at), c.id) end
    redis.call('HSET', c.record, 'S', code)
    n = n + 1
  elseif score and not A.hold and (r[1] == 'h' or r[1] == 'g') and (tonumber(r[2] or 0) or 0) <= now then
    if r[1] == 'h' and score > now then redis.call('ZADD', due, now_s, c.id) end
    redis.call('HSET', c.record, 'S', 's')
    n = n + 1
  end
end
return {'n', n}
