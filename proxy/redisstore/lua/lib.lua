-- lib.lua: helpers shared by the store's scripts. The store prepends this
-- file to each script (scripts.go), so every script runs as one chunk and
-- stays self-contained on the server.
--
-- Conventions: times are Unix ms passed in ARGV from the store's injected
-- clock (never TIME); an absent hash field reads as false; numbers written
-- to Redis go through str() so they are never formatted as 1.7e+12.

-- str formats an integral number as a decimal string.
local function str(n)
  return string.format('%d', n)
end

-- num converts a reply value to a number; absent or empty is 0.
local function num(v)
  if not v or v == '' then return 0 end
  return tonumber(v)
end

-- gate reads the endpoint hash and returns the gate state (disabled,
-- paused, breaker_open, probing, half_open, open) and when it may open
-- again (ms; 0 when not known).
-- breaker_state is the breaker's state at now from its stored fields
-- (SPEC §6): 'closed'; 'open' until the probe time pa; 'half_open' from
-- then on. The one place this rule lives (ARCHITECTURE.md).
local function breaker_state(bs, pa, now)
  if bs ~= 'open' then return 'closed' end
  if num(pa) > now then return 'open' end
  return 'half_open'
end

local function gate(ep, now)
  local f = redis.call('HMGET', ep, 'dis', 'pu', 'bs', 'pa', 'pt', 'pe')
  if f[1] == '1' then return 'disabled', 0 end
  local pu = num(f[2])
  if pu > now then return 'paused', pu end
  local b = breaker_state(f[3], f[4], now)
  if b == 'open' then return 'breaker_open', num(f[4]) end
  if b == 'half_open' then
    local pe = num(f[6])
    if f[5] and pe > now then return 'probing', pe end
    return 'half_open', 0
  end
  return 'open', 0
end

-- shut reports whether a gate state holds callouts back (not disabled).
local function shut(g)
  return g == 'paused' or g == 'breaker_open' or g == 'probing'
end

-- backlog_full reports whether one more callout with add_bytes of body
-- would exceed the endpoint's caps (0: no cap). Items are due + leased.
local function backlog_full(due, lease, ep, max_items, max_bytes, add_bytes)
  if max_items > 0 then
    local items = redis.call('ZCARD', due) + redis.call('ZCARD', lease)
    if items + 1 > max_items then return true end
  end
  if max_bytes > 0 and num(redis.call('HGET', ep, 'bb')) + add_bytes > max_bytes then
    return true
  end
  return false
end

-- idem_lookup returns {id, fingerprint} of the callout holding the
-- reservation, or nil when it is free, held by stale_id (a callout whose
-- record is gone) or by takeover_id (the dead letter a replay replaces).
local function idem_lookup(idem, stale_id, takeover_id)
  if not idem or idem == '' then return nil end
  local cur = redis.call('HMGET', idem, 'id', 'fp')
  if not cur[1] or cur[1] == stale_id or cur[1] == takeover_id then return nil end
  return cur
end

-- create writes a new callout: its request fields (ARGV pairs from index
-- first on) into the record c, its body into b (when not empty); reserves
-- its idempotency key (pending: no TTL) and counts the body's bytes in the
-- endpoint's backlog.
local function create(c, b, ep, idem, id, fp, body, first)
  redis.call('HSET', c, unpack(ARGV, first))
  if #body > 0 then
    redis.call('SET', b, body)
    redis.call('HINCRBY', ep, 'bb', #body)
  end
  if idem and idem ~= '' then
    redis.call('HSET', idem, 'id', id, 'fp', fp)
    redis.call('PERSIST', idem)
  end
end

-- append_attempt appends one JSON attempt object, as a line, to the log l.
local function append_attempt(l, entry)
  redis.call('APPEND', l, entry .. '\n')
end

-- finish ends a callout whose parts are p = {record, body, log, response}:
-- final state and time, lease fields gone, body bytes released from the
-- backlog, TTL on every part and on its reservation (when that still points
-- at it).
local function finish(p, ep, idem, id, state, now_s, ttl)
  local c = p[1]
  redis.call('HSET', c, 's', state, 'ft', now_s)
  redis.call('HDEL', c, 'lt', 'lx', 'ls', 'lk', 'na')
  local n = redis.call('STRLEN', p[2])
  if n > 0 and redis.call('HINCRBY', ep, 'bb', -n) <= 0 then
    redis.call('HDEL', ep, 'bb')
  end
  for i = 1, 4 do redis.call('PEXPIRE', p[i], ttl) end
  if idem and idem ~= '' and redis.call('HGET', idem, 'id') == id then
    redis.call('PEXPIRE', idem, ttl)
  end
end

-- dead_letter finishes a callout as a dead letter and indexes it; index
-- entries older than prune_before (ms) are dropped on the way.
local function dead_letter(p, ep, dl, idem, id, now_s, reason, ttl, prune_before)
  redis.call('HSET', p[1], 'dr', reason)
  finish(p, ep, idem, id, 'dead_lettered', now_s, ttl)
  redis.call('ZADD', dl, now_s, id)
  redis.call('ZREMRANGEBYSCORE', dl, '-inf', '(' .. prune_before)
end

-- breaker_update applies one attempt's result to the endpoint's circuit
-- breaker (SPEC §6) and returns opened, closed, began, ended (0/1): whether
-- this result opened or closed the breaker, began or ended an outage.
--   success: failures reset, breaker closed, outage ended, last success
--     recorded; no write at all when nothing was failing (DESIGN: a success
--     costs no write when the failure count is already 0).
--   is_probe and not success: the probe token is released; a counting
--     failure reopens the breaker for another interval (probe_next), an
--     answer that does not count (permanent, 429, canceled) leaves it
--     half-open, so the next request or held callout probes (policy
--     Breaker.Record: such a result is no verdict on the upstream's health).
--   counts: consecutive failures + 1; the first one after a success starts
--     an outage; at threshold a closed breaker opens, opened_at written once.
local function breaker_update(ep, now_s, is_probe, success, counts, threshold, probe_next)
  if success then
    local f = redis.call('HMGET', ep, 'cf', 'bs', 'os')
    if not f[1] and not f[2] and not f[3] then return 0, 0, 0, 0 end
    local closed, ended = 0, 0
    if f[2] == 'open' then closed = 1 end
    if f[3] then ended = 1 end
    redis.call('HDEL', ep, 'cf', 'bs', 'oa', 'pa', 'pt', 'pe', 'os', 'on')
    redis.call('HSET', ep, 'lsu', now_s)
    return 0, closed, 0, ended
  end
  if is_probe then
    redis.call('HDEL', ep, 'pt', 'pe')
    if counts then redis.call('HSET', ep, 'pa', probe_next) end
  end
  if not counts then return 0, 0, 0, 0 end
  local opened, began = 0, 0
  local cf = redis.call('HINCRBY', ep, 'cf', 1)
  if redis.call('HSETNX', ep, 'os', now_s) == 1 then began = 1 end
  if cf >= threshold and redis.call('HGET', ep, 'bs') ~= 'open' then
    redis.call('HSET', ep, 'bs', 'open', 'pa', probe_next)
    redis.call('HSETNX', ep, 'oa', now_s)
    opened = 1
  end
  return opened, 0, began, 0
end

-- pause extends the endpoint-wide pause to until (ms), never shortening it.
local function pause(ep, until_s)
  local u = tonumber(until_s)
  if u > 0 and u > num(redis.call('HGET', ep, 'pu')) then
    redis.call('HSET', ep, 'pu', until_s)
  end
end


-- outbox_dead_letter queues, in the same script as the dead letter, the
-- Salesforce writes it causes (outbox.go, SPEC §7, §8): the
-- Failed_Callout__c mirror ('m:' id, due now), the check of its copy's
-- expiry (sfx, due when its TTL ends) and, when the callout was scheduled,
-- its Callout_Result__e ('e:' id). c is the record, sfo the outbox, sfx the
-- expiry schedule of the callout's shard.
local function outbox_dead_letter(c, sfo, sfx, id, now_s, ttl, scheduled)
  redis.call('ZADD', sfo, 'NX', now_s, 'm:' .. id)
  redis.call('ZADD', sfx, str(tonumber(now_s) + tonumber(ttl)), id)
  if scheduled then redis.call('ZADD', sfo, 'NX', now_s, 'e:' .. id) end
end
