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

-- breaker_state is the breaker's state at now from its stored fields
-- (contract §6): 'closed'; 'open' until the probe time pa; 'half_open' from
-- then on. The one place this rule lives (ARCHITECTURE.md).
local function breaker_state(bs, pa, now)
  if bs ~= 'open' then return 'closed' end
  if num(pa) > now then return 'open' end
  return 'half_open'
end

-- gate_fields are the endpoint-hash fields gate_of reads.
local gate_fields = {'dis', 'pu', 'bs', 'pa', 'pt', 'pe'}

-- gate_of returns the gate state (disabled, paused, breaker_open, probing,
-- half_open, open) and when it may open again (ms; 0 when not known) from
-- the endpoint hash's fields f (a table by field name; absent: false).
-- The one place the gate rule lives (ARCHITECTURE.md).
local function gate_of(f, now)
  if f.dis == '1' then return 'disabled', 0 end
  local pu = num(f.pu)
  if pu > now then return 'paused', pu end
  local b = breaker_state(f.bs, f.pa, now)
  if b == 'open' then return 'breaker_open', num(f.pa) end
  if b == 'half_open' then
    local pe = num(f.pe)
    if f.pt and pe > now then return 'probing', pe end
    return 'half_open', 0
  end
  return 'open', 0
end

-- hread reads the fields names of hash h into a table by name (absent:
-- false), in one HMGET.
local function hread(h, names)
  local v = redis.call('HMGET', h, unpack(names))
  local f = {}
  for i, n in ipairs(names) do f[n] = v[i] end
  return f
end

-- gate reads the endpoint hash ep and returns gate_of its fields.
local function gate(ep, now)
  return gate_of(hread(ep, gate_fields), now)
end

-- shut reports whether a gate state holds callouts back (not disabled).
local function shut(g)
  return g == 'paused' or g == 'breaker_open' or g == 'probing'
end

-- record_overhead is what one stored callout costs Redis besides its field
-- names, values and body (key names, its due or lease entry, its
-- reservation), in bytes: a round figure of TestPendingCalloutMemory's
-- measure, so the byte caps count what Redis really holds.
local record_overhead = 256

-- over_caps reports which backlog cap one more callout of add bytes from
-- the issuer tagged tag would pass, or false (contract §10): 'backlog_full'
-- for the endpoint's (or queue's) caps — items pending (items, counted by
-- the caller), bytes everything its pending callouts and dead letters
-- store ('bb' of f) — and 'issuer_backlog_full' for the issuer's share of
-- them ('ii:'/'ib:' tag of f). lim = {max items, max bytes, max items per
-- issuer, max bytes per issuer}, 0: no cap. The one owner of the cap rule.
local function over_caps(f, items, lim, add, tag)
  if lim[1] > 0 and items + 1 > lim[1] then return 'backlog_full' end
  if lim[2] > 0 and num(f.bb) + add > lim[2] then return 'backlog_full' end
  if tag ~= '' then
    if lim[3] > 0 and num(f['ii:' .. tag]) + 1 > lim[3] then return 'issuer_backlog_full' end
    if lim[4] > 0 and num(f['ib:' .. tag]) + add > lim[4] then return 'issuer_backlog_full' end
  end
  return false
end

-- backlog_full reports which backlog cap one more callout of add_bytes
-- stored bytes, from the issuer tagged tag, would pass (0: no cap), or
-- false: 'backlog_full' for the endpoint's caps (items: due + leased;
-- bytes: everything its pending callouts and dead letters store, 'bb'),
-- 'issuer_backlog_full' for the issuer's share of them ('ii:'/'ib:' tag,
-- contract §10 per-org shares).
-- lim = {max items, max bytes, max items per issuer, max bytes per issuer}.
local function backlog_full(due, lease, ep, lim, add_bytes, tag)
  local items = 0
  if lim[1] > 0 then items = redis.call('ZCARD', due) + redis.call('ZCARD', lease) end
  return over_caps(hread(ep, {'bb', 'ii:' .. tag, 'ib:' .. tag}), items, lim, add_bytes, tag)
end

-- stored_size is the bytes a new callout will store: its record's field
-- names and values (ARGV from first on), its body and record_overhead.
local function stored_size(body, first)
  local n = #body + record_overhead
  for i = first, #ARGV do n = n + #ARGV[i] end
  return n
end

-- add is HINCRBY that drops the field when it reaches 0 or less, so an
-- idle endpoint keeps no counter fields.
local function add(h, f, n)
  if n ~= 0 and redis.call('HINCRBY', h, f, n) <= 0 then redis.call('HDEL', h, f) end
end

-- charge counts n more stored bytes of callout c (record field 'cb') in its
-- endpoint's and its issuer's backlog bytes; a record written before byte
-- accounting (no 'cb' and no 'it') is not charged further.
local function charge(c, ep, n)
  local f = redis.call('HMGET', c, 'cb', 'it')
  if not f[1] and not f[2] then return end
  redis.call('HINCRBY', c, 'cb', n)
  add(ep, 'bb', n)
  if f[2] and f[2] ~= '' then add(ep, 'ib:' .. f[2], n) end
end

-- uncharge releases every byte callout c was charged ('cb'; a record from
-- before byte accounting: its body's length, as that version counted) from
-- the endpoint's and issuer's backlog bytes, and returns its issuer tag.
local function uncharge(c, b, ep)
  local f = redis.call('HMGET', c, 'cb', 'it')
  local n = num(f[1])
  if not f[1] then n = redis.call('STRLEN', b) end
  add(ep, 'bb', -n)
  if f[2] and f[2] ~= '' then add(ep, 'ib:' .. f[2], -n) end
  redis.call('HDEL', c, 'cb')
  return f[2] or ''
end

-- unpend counts one pending callout of issuer tag less ('ii:' tag).
local function unpend(ep, tag)
  if tag and tag ~= '' then add(ep, 'ii:' .. tag, -1) end
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
-- its idempotency key (pending: no TTL) and charges everything it stores
-- (stored_size) to the endpoint's and its issuer's (tag) backlog, and one
-- pending item to the issuer.
local function create(c, b, ep, idem, id, fp, body, first, tag)
  local n = stored_size(body, first)
  redis.call('HSET', c, unpack(ARGV, first))
  redis.call('HSET', c, 'cb', n, 'it', tag)
  if #body > 0 then redis.call('SET', b, body) end
  add(ep, 'bb', n)
  if tag ~= '' then
    add(ep, 'ib:' .. tag, n)
    add(ep, 'ii:' .. tag, 1)
  end
  if idem and idem ~= '' then
    redis.call('HSET', idem, 'id', id, 'fp', fp)
    redis.call('PERSIST', idem)
  end
end

-- append_attempt appends one JSON attempt object, as a line, to the log l
-- of callout c, charged to its backlog bytes.
local function append_attempt(c, ep, l, entry)
  redis.call('APPEND', l, entry .. '\n')
  charge(c, ep, #entry + 1)
end

-- finish ends a callout whose parts are p = {record, body, log, response}:
-- final state and time, lease fields gone, one pending item less for its
-- issuer, TTL on every part and on its reservation (when that still points
-- at it). A callout that ended succeeded or failed keeps what an idempotent
-- replay and its status document need (fingerprint, status, response,
-- attempts, times) but not the request: its headers and body are deleted
-- and its bytes released from the backlog (contract §5). A dead letter keeps
-- everything, still charged, until discard or expiry (dl_release).
local function finish(p, ep, idem, id, state, now_s, ttl)
  local c = p[1]
  redis.call('HSET', c, 's', state, 'ft', now_s)
  redis.call('HDEL', c, 'lt', 'lx', 'ls', 'lk', 'na')
  local tag
  if state == 'dead_lettered' and redis.call('HEXISTS', c, 'cb') == 1 then
    tag = redis.call('HGET', c, 'it')
  else
    -- (A dead letter from before byte accounting releases its body's
    -- bytes here, as that version did.)
    tag = uncharge(c, p[2], ep)
  end
  if state ~= 'dead_lettered' then
    redis.call('DEL', p[2])
    local drop = {}
    for _, f in ipairs(redis.call('HKEYS', c)) do
      if string.sub(f, 1, 2) == 'h:' then drop[#drop + 1] = f end
    end
    if #drop > 0 then redis.call('HDEL', c, unpack(drop)) end
  end
  unpend(ep, tag)
  for i = 1, 4 do redis.call('PEXPIRE', p[i], ttl) end
  if idem and idem ~= '' and redis.call('HGET', idem, 'id') == id then
    redis.call('PEXPIRE', idem, ttl)
  end
end

-- dl_release releases the backlog bytes of the dead letters whose index
-- entries are in ids (their records are gone or going: discarded, or
-- expired by TTL), as noted in the endpoint's dead-letter bytes hash dlb
-- ("bytes tag" per id), and drops their index entries.
local function dl_release(ep, dl, dlb, ids)
  for _, id in ipairs(ids) do
    local v = redis.call('HGET', dlb, id)
    if v then
      local n, tag = string.match(v, '^(%d+) ?(.*)$')
      add(ep, 'bb', -tonumber(n))
      if tag ~= '' then add(ep, 'ib:' .. tag, -tonumber(n)) end
      redis.call('HDEL', dlb, id)
    end
    redis.call('ZREM', dl, id)
  end
end

-- dl_prune drops up to 100 index entries older than prune_before (ms),
-- releasing their bytes (dl_release); a larger backlog of expired entries
-- goes with the next dead letters and the hourly sweep.
local function dl_prune(ep, dl, dlb, prune_before)
  local ids = redis.call('ZRANGEBYSCORE', dl, '-inf', '(' .. prune_before, 'LIMIT', 0, 100)
  dl_release(ep, dl, dlb, ids)
  return #ids
end

-- dead_letter finishes a callout as a dead letter, indexes it and notes its
-- charged bytes for their release at expiry; index entries older than
-- prune_before (ms) are dropped on the way. dlb is the dead-letter bytes
-- hash, or '' for a caller from before byte accounting.
local function dead_letter(p, ep, dl, dlb, idem, id, now_s, reason, ttl, prune_before)
  redis.call('HSET', p[1], 'dr', reason)
  finish(p, ep, idem, id, 'dead_lettered', now_s, ttl)
  redis.call('ZADD', dl, now_s, id)
  local f = redis.call('HMGET', p[1], 'cb', 'it')
  if f[1] then redis.call('HSET', dlb, id, f[1] .. ' ' .. (f[2] or '')) end
  dl_prune(ep, dl, dlb, prune_before)
end

-- gate_changed tells every replica's gate cache (gatecache.go) that the
-- gate of endpoint hash ep changed in this script: one PUBLISH of the key on
-- the 'cp:gate' channel (on Redis Cluster, PUBLISH reaches every node's
-- subscribers). Call it after the change, in the script that makes it.
local function gate_changed(ep)
  redis.call('PUBLISH', 'cp:gate', ep)
end

-- gate_dirty is set by breaker_apply and pause_apply when they change what
-- the gate cache shows; gate_publish, called after the endpoint hash is
-- written, publishes it once.
local gate_dirty = false
local function gate_publish(ep)
  if gate_dirty then gate_changed(ep) end
  gate_dirty = false
end

-- put sets field n of the in-memory hash f to v (false: delete) and notes
-- the write in w, for hflush.
local function put(f, w, n, v)
  f[n] = v
  w[n] = v
end

-- hflush writes the noted writes w to hash h: one HSET for the values, one
-- HDEL for the deletions (each only when needed).
local function hflush(h, w)
  local s, d = {}, {}
  for n, v in pairs(w) do
    if v then s[#s + 1] = n; s[#s + 1] = v else d[#d + 1] = n end
  end
  if #s > 0 then redis.call('HSET', h, unpack(s)) end
  if #d > 0 then redis.call('HDEL', h, unpack(d)) end
end

-- breaker_fields are the endpoint-hash fields breaker_apply reads.
local breaker_fields = {'cf', 'bs', 'os', 'oa', 'pa', 'pt', 'pe', 'on'}

-- breaker_apply applies one attempt's result to the circuit breaker whose
-- endpoint-hash fields are f (contract §6), noting its writes in w (put), and
-- returns opened, closed, began, ended (0/1): whether this result opened or
-- closed the breaker, began or ended an outage. The one owner of the
-- breaker transitions (ARCHITECTURE.md).
--   success: failures reset, breaker closed, outage ended, last success
--     recorded; no write at all when nothing was failing (ARCHITECTURE.md: a success
--     costs no write when the failure count is already 0).
--   is_probe and not success: the probe token is released; a counting
--     failure reopens the breaker for another interval (probe_next), an
--     answer that does not count (permanent, 429, canceled) leaves it
--     half-open, so the next request or held callout probes (such a result
--     is no verdict on the upstream's health).
--   counts: consecutive failures + 1; the first one after a success starts
--     an outage; at threshold a closed breaker opens, opened_at written once.
local function breaker_apply(f, w, now_s, is_probe, success, counts, threshold, probe_next)
  if success then
    if not f.cf and not f.bs and not f.os then return 0, 0, 0, 0 end
    local closed, ended = 0, 0
    if f.bs == 'open' then closed = 1 end
    if f.os then ended = 1 end
    for _, n in ipairs({'cf', 'bs', 'oa', 'pa', 'pt', 'pe', 'os', 'on'}) do
      if f[n] then put(f, w, n, false) end
    end
    put(f, w, 'lsu', now_s)
    gate_dirty = true
    return 0, closed, 0, ended
  end
  if is_probe then
    put(f, w, 'pt', false)
    put(f, w, 'pe', false)
    if counts then put(f, w, 'pa', probe_next) end
    gate_dirty = true
  end
  if not counts then return 0, 0, 0, 0 end
  local opened, began = 0, 0
  local cf = num(f.cf) + 1
  put(f, w, 'cf', str(cf))
  if not f.os then
    put(f, w, 'os', now_s)
    began = 1
  end
  if cf >= threshold and f.bs ~= 'open' then
    put(f, w, 'bs', 'open')
    put(f, w, 'pa', probe_next)
    if not f.oa then put(f, w, 'oa', now_s) end
    opened = 1
  end
  if not is_probe and (began == 1 or opened == 1) then gate_dirty = true end
  return opened, 0, began, 0
end

-- breaker_update is breaker_apply on the endpoint hash ep itself: it reads
-- the fields, applies the result and writes the changes.
local function breaker_update(ep, now_s, is_probe, success, counts, threshold, probe_next)
  local f, w = hread(ep, breaker_fields), {}
  local opened, closed, began, ended = breaker_apply(f, w, now_s, is_probe, success, counts, threshold, probe_next)
  hflush(ep, w)
  gate_publish(ep)
  return opened, closed, began, ended
end

-- pause_apply extends the endpoint-wide pause in f to until (ms), never
-- shortening it.
local function pause_apply(f, w, until_s)
  local u = tonumber(until_s)
  if u > 0 and u > num(f.pu) then
    put(f, w, 'pu', until_s)
    gate_dirty = true
  end
end

-- pause extends the endpoint-wide pause to until (ms), never shortening it.
-- newly_held is how many waiting callouts (the due set's size) a result
-- just shut the gate on: g0 is the gate before the result, g1 after. 0
-- when it was shut already or is still open. Counted once, by the result
-- that shut it (callout_deferred_total), however many replicas see it shut.
local function newly_held(due, g0, g1)
  if shut(g1) and not shut(g0) and g1 ~= 'disabled' then
    return redis.call('ZCARD', due)
  end
  return 0
end

local function pause(ep, until_s)
  local f, w = hread(ep, {'pu'}), {}
  pause_apply(f, w, until_s)
  hflush(ep, w)
  gate_publish(ep)
end

-- outbox_dead_letter queues, in the same script as the dead letter, the
-- Salesforce writes it causes (outbox.go, contract §7, §8): the
-- Failed_Callout__c mirror ('m:' id, due now), the check of its copy's
-- expiry (sfx, due when its TTL ends) and, when the callout was scheduled,
-- its Callout_Result__e ('e:' id). c is the record, sfo the outbox, sfx the
-- expiry schedule of the callout's shard.
local function outbox_dead_letter(c, sfo, sfx, id, now_s, ttl, scheduled)
  redis.call('ZADD', sfo, 'NX', now_s, 'm:' .. id)
  redis.call('ZADD', sfx, str(tonumber(now_s) + tonumber(ttl)), id)
  if scheduled then redis.call('ZADD', sfo, 'NX', now_s, 'e:' .. id) end
end
