-- complete.lua: one atomic completion of a leased attempt (ARCHITECTURE.md "Data
-- flow" 2): fence on the lease token, log the attempt, keep the last
-- response, update the circuit breaker and pause, then ack / reschedule /
-- continue inline / dead-letter.
--
-- KEYS: 1 callout record, 2 its body, 3 its attempt log, 4 its response,
--       5 due, 6 lease, 7 endpoint hash, 8 dead-letter index,
--       9 Salesforce outbox, 10 its expiry schedule (outbox.go),
--       11 dead-letter bytes, 12 idempotency key (optional)
-- ARGV: 1 now ms, 2 id, 3 lease token, 4 action: succeeded|failed|retry|again|dead,
--       5 attempt JSON ('' = never dispatched: the claim's count is undone),
--       6 success '1'|'0', 7 counts toward the breaker '1'|'0',
--       8 breaker threshold, 9 probe time if the breaker (re)opens (ms),
--       10 next due ms (retry, and again when refused), 11 dead-letter reason,
--       12 finished TTL ms, 13 dead-letter TTL ms, 14 prune index before ms,
--       15 paused until ms (0: none), 16 lease until ms (again),
--       17 response status ('' = no response), 18 the response, encoded
--       (keys.go), 19 last error, 20 Salesforce outbox on '1'|'0'
-- Returns {'stale'} when the token is not the callout's current lease, else
--   {state, opened, closed, outage_began, outage_ended, notify, failures,
--    outage_started_ms, probe, attempts, dead-letter reason}: the state and
--   reason are this script's decision (it may turn a retry into a dead
--   letter endpoint_disabled); callers read them and derive nothing.
local p = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}
local c, due, lease, ep, dl, dlb, idem = KEYS[1], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[11], KEYS[12]
-- The Salesforce outbox (outbox.go): written in this script so that no
-- dead letter, outage or completion can end without its Salesforce write.
local sfo, sfx, outbox = KEYS[9], KEYS[10], ARGV[20] == '1'
local now_s = ARGV[1]
local now = tonumber(now_s)
local id, token, action, reason = ARGV[2], ARGV[3], ARGV[4], ARGV[11]

local cur = redis.call('HMGET', c, 's', 'lt')
if cur[1] ~= 'in_flight' or cur[2] ~= token then return {'stale'} end

local dispatched = ARGV[5] ~= ''
if dispatched then
  append_attempt(c, ep, p[3], ARGV[5])
else
  redis.call('HINCRBY', c, 'n', -1)
end
if ARGV[17] ~= '' then
  redis.call('HSET', c, 'rs', ARGV[17])
  local before = redis.call('STRLEN', p[4])
  redis.call('SET', p[4], ARGV[18])
  charge(c, ep, #ARGV[18] - before)
end
if ARGV[19] ~= '' then
  redis.call('HSET', c, 'le', ARGV[19])
elseif dispatched then
  redis.call('HDEL', c, 'le')
end

local is_probe = redis.call('HGET', ep, 'pt') == token
local opened, closed, began, ended = 0, 0, 0, 0
if dispatched then
  opened, closed, began, ended = breaker_update(ep, now_s, is_probe, ARGV[6] == '1',
    ARGV[7] == '1', tonumber(ARGV[8]), ARGV[9])
elseif is_probe then
  redis.call('HDEL', ep, 'pt', 'pe')
end
pause(ep, ARGV[15])

local g, g_until = gate(ep, now)
if g == 'disabled' and (action == 'retry' or action == 'again') then
  action, reason = 'dead', 'endpoint_disabled'
end
if action == 'again' and g ~= 'open' then action = 'again_refused' end

local state, notify = action, 0
if action == 'again' then
  state = 'in_flight'
  redis.call('ZADD', lease, ARGV[16], id)
  redis.call('HINCRBY', c, 'n', 1)
  redis.call('HSET', c, 'lx', ARGV[16], 'ls', now_s, 'lk', 'retry')
elseif action == 'retry' or action == 'again_refused' then
  local at = ARGV[10]
  state = 'scheduled'
  if shut(g) then
    state = 'held'
    if g_until > tonumber(at) then at = str(g_until) end
  end
  redis.call('ZREM', lease, id)
  redis.call('ZADD', due, at, id)
  redis.call('HSET', c, 's', state, 'na', at)
  redis.call('HDEL', c, 'lt', 'lx', 'ls', 'lk')
elseif action == 'dead' then
  state = 'dead_lettered'
  redis.call('ZREM', lease, id)
  dead_letter(p, ep, dl, dlb, idem, id, now_s, reason, ARGV[13], ARGV[14])
  if reason ~= 'endpoint_disabled' and redis.call('HEXISTS', ep, 'os') == 1
      and redis.call('HSETNX', ep, 'on', '1') == 1 then
    notify = 1
  end
  if outbox then
    -- 'sd' marks a callout a dispatcher claimed: only those were scheduled
    -- and publish a completion event (contract §8).
    outbox_dead_letter(c, sfo, sfx, id, now_s, ARGV[13], redis.call('HEXISTS', c, 'sd') == 1)
    if notify == 1 then
      redis.call('ZADD', sfo, 'NX', now_s, 'o:' .. redis.call('HGET', c, 'ep') .. ':' .. id)
    end
  end
else
  redis.call('ZREM', lease, id)
  finish(p, ep, idem, id, action, now_s, ARGV[12])
  if outbox and action == 'succeeded' and redis.call('HEXISTS', c, 'sd') == 1 then
    redis.call('ZADD', sfo, 'NX', now_s, 'e:' .. id)
  end
end

local e = redis.call('HMGET', ep, 'cf', 'os')
local probe = 0
if is_probe then probe = 1 end
local why = ''
if state == 'dead_lettered' then why = reason end
return {state, opened, closed, began, ended, notify, num(e[1]), num(e[2]), probe,
  num(redis.call('HGET', c, 'n')), why}
