-- lib.lua: helpers shared by the store's scripts. The store prepends this
-- file to each script (scripts.go), so every script runs as one chunk and
-- stays self-contained on the server.
--
-- Conventions: Redis's clock is the one clock of shared state (contract §1,
-- ARCHITECTURE.md "One clock"): every script takes "now" from clock(A.now)
-- (script.Clock, prepended before this file with script.Numbers: str and
-- num), which reads TIME, and replicas pass durations (ms), never instants, for
-- due times, leases, probe times, pauses and retentions. An absent hash
-- field reads as false; numbers written to Redis go through str() so they
-- are never formatted as 1.7e+12.

-- breaker_state is the breaker's state at now from its stored fields
-- (contract §6): 'closed'; 'open' until the probe time pa; 'half_open' from
-- then on. The one place this rule lives (ARCHITECTURE.md).
local function breaker_state(bs, pa, now)
  if bs ~= 'open' then return 'closed' end
  if num(pa) > now then return 'open' end
  return 'half_open'
end

-- Breaker partitions (contract §6 "Partitions"): each organisation (issuer
-- tag p) has its own breaker in the endpoint hash, fields cf:p bs:p oa:p
-- pa:p pt:p pe:p (pf below); the endpoint's own breaker (the unsuffixed
-- fields; partition '', also breaker.partition endpoint and callouts
-- without an issuer) opens only when the partitions of quorum
-- organisations are open and live ('po', po_live). The outage (os, on),
-- the last success (lsu), pause and disable stay the endpoint's.
local partition_quorum = 2 -- quorum where the caller gives none (< 1)

-- pf is the name of breaker field n of partition p.
local function pf(n, p)
  if p == nil or p == '' then return n end
  return n .. ':' .. p
end

-- gate_base are the endpoint-hash fields gate_of reads for partition ''.
local gate_base = {'dis', 'pu', 'bs', 'pa', 'pt', 'pe'}

-- gate_fields_of are the endpoint-hash fields gate_of reads for
-- partition p.
local function gate_fields_of(p)
  if p == nil or p == '' then return gate_base end
  return {'dis', 'pu', 'bs', 'pa', 'pt', 'pe', pf('bs', p), pf('pa', p), pf('pt', p), pf('pe', p)}
end

-- breaker_gate is the gate one breaker (partition p's fields of f) puts
-- up at now, and when it may open, or nil when it is closed.
local function breaker_gate(f, now, p)
  local b = breaker_state(f[pf('bs', p)], f[pf('pa', p)], now)
  if b == 'open' then return 'breaker_open', num(f[pf('pa', p)]) end
  if b == 'half_open' then
    local pe = num(f[pf('pe', p)])
    if f[pf('pt', p)] and pe > now then return 'probing', pe end
    return 'half_open', 0
  end
  return nil, 0
end

-- gate_of returns the gate state (disabled, paused, breaker_open, probing,
-- half_open, open) that partition p (nil or '': the endpoint's own
-- breaker) meets at now, when it may open again (ms; 0 when not known),
-- and the partition whose breaker it is ('' the endpoint's; a half-open
-- gate's probe token is that partition's pt field) from the endpoint
-- hash's fields f (a table by field name; absent: false). The endpoint's
-- own breaker comes first, then the partition's — but probes are taken
-- from the partition they test (contract §6): while the endpoint's breaker
-- is half-open, a partition that is not closed meets its own gate (open,
-- probing, or half-open: it takes its own probe token, never the
-- endpoint's), so the endpoint's probe is always a callout or read of an
-- organisation whose partition is closed, and a failing organisation's
-- probe can neither take it nor reopen the endpoint. The one place the
-- gate rule lives (ARCHITECTURE.md).
local function gate_of(f, now, p)
  p = p or ''
  if f.dis == '1' then return 'disabled', 0, '' end
  local pu = num(f.pu)
  if pu > now then return 'paused', pu, '' end
  local g, u = breaker_gate(f, now, '')
  if g == 'half_open' and p ~= '' then
    local gp, up = breaker_gate(f, now, p)
    if gp then return gp, up, p end
  end
  if g then return g, u, '' end
  if p ~= '' then
    g, u = breaker_gate(f, now, p)
    if g then return g, u, p end
  end
  return 'open', 0, ''
end

-- hread reads the fields names of hash h into a table by name (absent:
-- false), in one HMGET.
local function hread(h, names)
  local v = redis.call('HMGET', h, unpack(names))
  local f = {}
  for i, n in ipairs(names) do f[n] = v[i] end
  return f
end

-- gate reads the endpoint hash ep and returns gate_of its fields for
-- partition p.
local function gate(ep, now, p)
  return gate_of(hread(ep, gate_fields_of(p)), now, p)
end

-- shut reports whether a gate state holds callouts back (not disabled).
local function shut(g)
  return g == 'paused' or g == 'breaker_open' or g == 'probing'
end

-- holds is the one rule of held against scheduled (contract §12 "A
-- callout's state"): a waiting callout due at (ms) is held while its gate
-- is shut (is_shut), else scheduled. Returns the state's name, its due time
-- (ms) and its record code: 'h' when it is due when the gate reopens
-- (g_until, ms; it was due before: a release makes it due now), 'g' when
-- its own later due time stays (a release keeps it: its backoff is what it
-- waits for), 's' when scheduled.
local function holds(is_shut, g_until, at)
  if not is_shut then return 'scheduled', at, 's' end
  if at < g_until then return 'held', g_until, 'h' end
  return 'held', at, 'g'
end

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

-- add is HINCRBY that drops the field when it reaches 0 or less, so an
-- idle endpoint keeps no counter fields.
local function add(h, f, n)
  if n ~= 0 and redis.call('HINCRBY', h, f, n) <= 0 then redis.call('HDEL', h, f) end
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

-- gate_changed tells every replica's gate cache (gatecache.go) that the
-- gate of endpoint hash ep changed in this script: one PUBLISH of the key on
-- the 'cp:gate' channel (on Redis Cluster, PUBLISH reaches every node's
-- subscribers). Call it after the change, in the script that makes it.
local function gate_changed(ep)
  redis.call('PUBLISH', 'cp:gate', ep)
end

-- gate_dirty is set by breaker_apply and pause_apply when they change what
-- the gate cache shows; gate_publish, called after the endpoint hash is
-- written, publishes it once. It is reset at the start of every call (a
-- function library keeps its locals from one FCALL to the next).
local gate_dirty = false
--@per-call gate_dirty = false
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

-- breaker_fields_of are the endpoint-hash fields breaker_apply reads for
-- partition p.
local function breaker_fields_of(p)
  local f = {'cf', 'bs', 'os', 'oa', 'pa', 'pt', 'pe', 'on', 'po', 'lsu'}
  if p ~= nil and p ~= '' then
    for _, n in ipairs({'cf', 'bs', 'oa', 'pa', 'pt', 'pe'}) do f[#f + 1] = pf(n, p) end
  end
  return f
end

-- po_live reads 'po', the open partitions with the time (ms) of each one's
-- last counting failure ("tag:ms,tag:ms"; issuer tags are base64url),
-- drops partition p's entry (its success), or sets it to now (mark: its
-- failure), and keeps only the live ones: a last failure at most window
-- ms ago (one breaker_probe_interval: an open partition with callouts or
-- requests fails a probe every interval; one that stopped calling stops
-- probing and ages out). It returns the kept entries' count and 'po''s new
-- value (false: none). A count of the earlier layout ("2") reads as none.
local function po_live(po, p, now, window, mark)
  local n, out = 0, {}
  for tag, ms in string.gmatch(po or '', '([%w_-]+):(%d+)') do
    if tag ~= p and tonumber(ms) >= now - window then
      n = n + 1
      out[#out + 1] = tag .. ':' .. ms
    end
  end
  if mark then
    n = n + 1
    out[#out + 1] = p .. ':' .. str(now)
  end
  if n == 0 then return 0, false end
  return n, table.concat(out, ',')
end

-- probe_of is the partition whose probe token the holder of token holds
-- in f ('' the endpoint's, p its partition's), or nil.
local function probe_of(f, token, p)
  if token == nil or token == '' then return nil end
  if f.pt == token then return '' end
  if p ~= nil and p ~= '' and f[pf('pt', p)] == token then return p end
  return nil
end

-- probe_release releases partition p's probe token ('' the endpoint's, as
-- probe_of names it) in f, noting the writes in w (put): the token and
-- its expiry go.
local function probe_release(f, w, p)
  put(f, w, pf('pt', p), false)
  put(f, w, pf('pe', p), false)
end

-- breaker_apply applies one attempt's result to the circuit breaker of
-- partition p (nil or '': the endpoint's own) whose endpoint-hash fields
-- are f (contract §6), noting its writes in w (put), and returns opened,
-- closed, began, ended (0/1): whether this result opened or closed a
-- breaker (the partition's or the endpoint's), began or ended an outage.
-- probe is the partition whose probe token the attempt held (probe_of),
-- nil when none. The one owner of the breaker transitions
-- (ARCHITECTURE.md).
--   success: the partition's and the endpoint's failures reset, their
--     breakers closed, the outage ended, last success recorded; no write
--     at all when nothing was failing (ARCHITECTURE.md: a success costs no
--     write when the failure count is already 0). Other partitions keep
--     their state: one organisation's success says nothing of another's.
--   probe and not success: that probe token is released; a counting
--     failure reopens its breaker for another interval (probe_next), an
--     answer that does not count (permanent, 429, canceled, overloaded)
--     leaves it half-open, so the next request or held callout probes (such
--     a result is no verdict on the upstream's health).
--   counts: the endpoint's consecutive failures + 1 (cf, any
--     organisation's), and the partition's (cf:p); the first one after a
--     success starts an outage; at threshold a closed breaker opens,
--     opened_at written once; each counting failure of an open partition
--     marks it live in 'po' (po_live), and the endpoint's breaker opens as
--     contract §6 "Partitions" says (quorum < 1: partition_quorum; a
--     success within the last probe interval, lsu, vetoes it).
--   lsu, the last success (ms), is written by a success that ends a
--     failure streak and otherwise at most once per half probe interval,
--     so it is never more than half an interval behind.
local function breaker_apply(f, w, now_s, probe, success, counts, threshold, probe_next, p, quorum)
  p = p or ''
  quorum = tonumber(quorum) or 0
  if quorum < 1 then quorum = partition_quorum end
  local window = num(probe_next) - num(now_s)
  if success then
    if not f.cf and not f.bs and not f.os and (p == '' or (not f[pf('cf', p)] and not f[pf('bs', p)])) then
      -- nothing failing: no write, but lsu kept within half an interval
      if num(f.lsu) >= num(now_s) - window / 2 then return 0, 0, 0, 0 end
      put(f, w, 'lsu', now_s)
      return 0, 0, 0, 0
    end
    local closed, ended = 0, 0
    if f.bs == 'open' then closed = 1 end
    if f.os then ended = 1 end
    for _, n in ipairs({'cf', 'bs', 'oa', 'pa', 'pt', 'pe', 'os', 'on'}) do
      if f[n] then put(f, w, n, false) end
    end
    if p ~= '' then
      if f[pf('bs', p)] == 'open' then closed = 1 end
      if f.po then
        local _, po = po_live(f.po, p, num(now_s), window, false)
        put(f, w, 'po', po)
      end
      for _, n in ipairs({'cf', 'bs', 'oa', 'pa', 'pt', 'pe'}) do
        if f[pf(n, p)] then put(f, w, pf(n, p), false) end
      end
    end
    put(f, w, 'lsu', now_s)
    gate_dirty = true
    return 0, closed, 0, ended
  end
  if probe then
    probe_release(f, w, probe)
    if counts then put(f, w, pf('pa', probe), probe_next) end
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
  local function open(q)
    put(f, w, pf('bs', q), 'open')
    put(f, w, pf('pa', q), probe_next)
    if not f[pf('oa', q)] then put(f, w, pf('oa', q), now_s) end
    opened = 1
  end
  if p == '' then
    if cf >= threshold and f.bs ~= 'open' then open('') end
  else
    local cfp = num(f[pf('cf', p)]) + 1
    put(f, w, pf('cf', p), str(cfp))
    if cfp >= threshold and f[pf('bs', p)] ~= 'open' then open(p) end
    if f[pf('bs', p)] == 'open' then
      local live, po = po_live(f.po, p, num(now_s), window, true)
      put(f, w, 'po', po)
      -- a success within the interval vetoes it (one organisation alone
      -- has nobody else to protect): the upstream answers someone
      local vetoed = quorum > 1 and num(f.lsu) > num(now_s) - window
      if live >= quorum and f.bs ~= 'open' and not vetoed then open('') end
    end
  end
  if not probe and (began == 1 or opened == 1) then gate_dirty = true end
  return opened, 0, began, 0
end

-- pause_apply extends the endpoint-wide pause in f to now + pause (ms; 0:
-- none), never shortening it.
local function pause_apply(f, w, now, pause)
  local u = now + (tonumber(pause) or 0)
  if u > now and u > num(f.pu) then
    put(f, w, 'pu', str(u))
    gate_dirty = true
  end
end

-- newly_shut reports whether a result shut the gate: g0 is the gate
-- before it, g1 after (disabled is not shut: a disable drains, it does not
-- hold); newly_held counts the callouts it held then.
local function newly_shut(g0, g1)
  return shut(g1) and not shut(g0)
end

-- shuts reports whether a result shut a gate, or moved a shut gate's
-- reopening later (a failed probe reopens the breaker, a later 429
-- lengthens the pause): g0 until u0 before it, g1 until u1 after (ms).
local function shuts(g0, u0, g1, u1)
  return shut(g1) and (not shut(g0) or u1 > u0)
end

-- shut_by is what a result shut (shuts), whose waiting callouts park.lua
-- then holds until the reopening: g0, u0 and g1, u1 are the gate of its
-- breaker partition p before and after (gate_in; g1 of level), e0, eu0 the
-- endpoint's own gate before (gate_of(f, now, '') of the fields f; e0 nil
-- when they are not this script's). The endpoint's own gate (a pause, the
-- endpoint's breaker) shutting holds every organisation even when p's was
-- shut already. Returns whether a gate shut, until when (ms) and whose (''
-- the endpoint's).
local function shut_by(f, now, p, e0, eu0, g0, u0, g1, u1, level)
  if e0 and p ~= '' then
    local e1, eu1 = gate_of(f, now, '')
    if shuts(e0, eu0, e1, eu1) then return true, eu1, '' end
  end
  if shuts(g0, u0, g1, u1) then return true, u1, level end
  return false, 0, ''
end

-- newly_held is how many waiting callouts (the due set's size) a result
-- just shut the gate on: g0 is the gate before the result, g1 after. 0
-- when it was shut already or is still open. Counted once, by the result
-- that shut it (callout_deferred_total), however many replicas see it shut.
local function newly_held(due, g0, g1)
  if newly_shut(g0, g1) then
    return redis.call('ZCARD', due)
  end
  return 0
end

-- owner_notice is the one rule of the owner notification about an outage
-- (contract §6: the owner is told once per outage, with its first dead
-- letter): a dead letter of reason other than endpoint_disabled, while the
-- endpoint hash's fields f show an outage ('os') not announced yet ('on'),
-- announces it ('on', noted in w). The owner is told (1) when can is true
-- — someone is there to tell (Options.Notify) — and then, with the outbox
-- on (sfo not ''), its entry 'o:' endpoint ':' id is queued in the same
-- script; else 0. Nothing in Go decides it again.
local function owner_notice(f, w, sfo, endpoint, id, now_s, reason, can)
  if reason == 'endpoint_disabled' or not f.os or f.on then return 0 end
  put(f, w, 'on', '1')
  if not can then return 0 end
  if sfo ~= '' then redis.call('ZADD', sfo, 'NX', now_s, 'o:' .. endpoint .. ':' .. id) end
  return 1
end

-- outbox_dead_letter queues, in the same script as the dead letter, the
-- Salesforce writes it causes (proxy/redisstore/outbox, contract §7, §8): the
-- Failed_Callout__c mirror ('m:' id, due now), the check of its copy's
-- expiry (sfx, due when its TTL ends) and, when the callout was scheduled,
-- its Callout_Result__e ('e:' id). c is the record, sfo the outbox, sfx the
-- expiry schedule of the callout's shard.
local function outbox_dead_letter(c, sfo, sfx, id, now_s, ttl, scheduled)
  redis.call('ZADD', sfo, 'NX', now_s, 'm:' .. id)
  redis.call('ZADD', sfx, str(tonumber(now_s) + tonumber(ttl)), id)
  if scheduled then redis.call('ZADD', sfo, 'NX', now_s, 'e:' .. id) end
end

-- A callout record is one hash with one-letter fields in Redis's compact
-- listpack encoding (every value at most 64 bytes): package record's
-- Field* constants name each, package deadletters' the replay mark.
-- A field a script drops is blanked ('' reads as absent, present() below),
-- so a record is always written with one HSET and never an HDEL.
-- Scripts never parse m or the chunks; they copy, keep or blank them.

-- st_code maps a state to its code in 'S'.
local st_code = {scheduled = 's', held = 'h', in_flight = 'f', succeeded = 'o',
  failed = 'x', dead_lettered = 'd'}
local st_name = {s = 'scheduled', h = 'held', g = 'held', f = 'in_flight', o = 'succeeded',
  x = 'failed', d = 'dead_lettered'}
-- kind_code maps an attempt kind to its code in 'k'.
local kind_code = {first = 'f', retry = 'r', probe = 'p', replay = 'y'}
local kind_name = {f = 'first', r = 'retry', p = 'probe', y = 'replay'}

-- rest_fields are the inline chunks of the packed headers and body;
-- resp_fields those of the last response.
local rest_fields = {'1', '2', '3', '4', '5', '6', '7', '8'}
local resp_fields = {'r1', 'r2', 'r3', 'r4'}
local chunk_len = 64

-- present reports whether a record field holds a value ('' is a blanked
-- field).
local function present(v)
  return v and v ~= ''
end

-- blank drops record field n (in memory rec, noted in wc) when present.
local function blank(rec, wc, n)
  if present(rec[n]) then put(rec, wc, n, '') end
end

-- put_chunks stores v in the record's fields names (64 bytes each, the
-- rest blanked); false when v does not fit them.
local function put_chunks(rec, wc, names, v)
  if #v > #names * chunk_len then return false end
  for i, n in ipairs(names) do
    local part = string.sub(v, (i - 1) * chunk_len + 1, i * chunk_len)
    if part ~= '' then put(rec, wc, n, part) else blank(rec, wc, n) end
  end
  return true
end

-- hall reads every field of hash h (a record: HGETALL, one pass over its
-- listpack, is cheaper than an HMGET of the two dozen fields a script may
-- need) into a table by name (absent: nil).
local function hall(h)
  local v = redis.call('HGETALL', h)
  local f = {}
  for i = 1, #v, 2 do f[v[i]] = v[i + 1] end
  return f
end

-- chunks_len is the length of what fields names of rec hold.
local function chunks_len(rec, names)
  local n = 0
  for _, f in ipairs(names) do
    if rec[f] then n = n + #rec[f] end
  end
  return n
end
-- lease_fields are the record's fields of the current lease.
local lease_fields = {'t', 'x', 'l', 'k'}

-- counter_names are the backlog counter fields of issuer tag in a queue's
-- counter hash (the endpoint hash for its home queue, keyspace).
local function counter_names(tag)
  return {'bb', 'bi', 'ii:' .. tag, 'ib:' .. tag}
end

-- concat returns a new list of the elements of lists a, b, …
local function concat(...)
  local out = {}
  for _, l in ipairs({...}) do
    for _, v in ipairs(l) do out[#out + 1] = v end
  end
  return out
end

-- acc_add adds bytes and items to the counters of issuer tag in the
-- in-memory counter hash f, noting the writes in w (put): 'bb' bytes and
-- 'bi' pending items of the queue, 'ib:'/'ii:' tag the issuer's share. A
-- counter that reaches 0 or less is dropped, so an idle queue keeps no counter
-- fields.
local function acc_add(f, w, tag, bytes, items)
  local function bump(n, d)
    if d == 0 then return end
    local v = num(f[n]) + d
    if v > 0 then put(f, w, n, str(v)) elseif f[n] then put(f, w, n, false) end
  end
  bump('bb', bytes)
  bump('bi', items)
  if tag and tag ~= '' then
    bump('ib:' .. tag, bytes)
    bump('ii:' .. tag, items)
  end
end

-- gate_in is the gate a queue's script acts on, when it may open and the
-- partition whose breaker it is: the gate of partition p in the endpoint
-- hash's fields f (gate_of) when the script runs in the endpoint hash's
-- slot (given is ''); else given and until_s, the gate the caller read
-- from the endpoint hash (a queue of a sharded endpoint, keyspace "Shards
-- and queues"), and p.
local function gate_in(f, given, until_s, now, p)
  if given == '' then return gate_of(f, now, p) end
  return given, num(until_s), p or ''
end

-- expire sets the TTL ms of a finished callout's record, its
-- long response (keys.r; keys.c when it has none) and its reservation
-- (keys.res; keys.c when it has none or its TTL is already right,
-- complete.lua).
local function expire(keys, ttl)
  redis.call('PEXPIRE', keys.c, ttl)
  if keys.r ~= keys.c then redis.call('PEXPIRE', keys.r, ttl) end
  if keys.res ~= keys.c then redis.call('PEXPIRE', keys.res, ttl) end
end

-- finish_blanks are the record fields finish blanks: lease_fields,
-- rest_fields, then 'b', 'Q' and 'd' — written out, because a function
-- library's top-level code runs where Lua's base functions (ipairs, which
-- concat uses) do not exist yet.
local finish_blanks = {'t', 'x', 'l', 'k', '1', '2', '3', '4', '5', '6', '7', '8', 'b', 'Q', 'd'}

-- finish ends a callout succeeded or failed (code 'o' or 'x'): it
-- keeps what an idempotent replay and its status document need (meta,
-- status, response, attempts, times) but not the request's headers and
-- body (contract §5), releases every byte it was charged and its pending item
-- (acc_add on the counters fa, writes in wa), and sets the TTLs. rec are
-- its fields as read (S, b, i, Q, the lease and the chunks at least: hall); wc
-- collects the record's writes.
local function finish(keys, rec, wc, fa, wa, code, now_s, ttl)
  acc_add(fa, wa, rec.i, -num(rec.b), -1)
  if present(rec.Q) then redis.call('DEL', keys.q) end
  put(rec, wc, 'S', code)
  put(rec, wc, 'F', now_s)
  for _, n in ipairs(finish_blanks) do blank(rec, wc, n) end
  hflush(keys.c, wc)
  expire(keys, ttl)
end

-- dead_letter ends a callout as a dead letter: it keeps
-- everything, still charged, until discard or expiry (dl_release), counts
-- one pending item less, indexes it (dl, its charge noted in dlb) and
-- prunes up to two index entries older than prune_before (ms) on the way
-- (the hourly sweep does the rest, dl_prune.lua), releasing their bytes
-- from the counters and their issuer's share: more(names) reads the
-- counter fields names into fa first (an entry may be another issuer's).
local function dead_letter(keys, rec, wc, fa, wa, id, reason, now_s, ttl, prune_before, more)
  put(rec, wc, 'S', 'd')
  put(rec, wc, 'F', now_s)
  put(rec, wc, 'D', reason)
  for _, n in ipairs(lease_fields) do blank(rec, wc, n) end
  acc_add(fa, wa, rec.i, 0, -1)
  hflush(keys.c, wc)
  expire(keys, ttl)
  if present(rec.Q) then redis.call('PEXPIRE', keys.q, ttl) end
  redis.call('ZADD', keys.dl, now_s, id)
  redis.call('HSET', keys.dlb, id, str(num(rec.b)) .. ' ' .. (rec.i or ''))
  local old = redis.call('ZRANGEBYSCORE', keys.dl, '-inf', '(' .. prune_before, 'LIMIT', 0, 2)
  for _, o in ipairs(old) do
    local v = redis.call('HGET', keys.dlb, o)
    if v then
      local n, tag = string.match(v, '^(%d+) ?(.*)$')
      more(counter_names(tag))
      acc_add(fa, wa, tag, -tonumber(n), 0)
      redis.call('HDEL', keys.dlb, o)
    end
    redis.call('ZREM', keys.dl, o)
  end
end

-- hmore reads into the in-memory hash f (from hash h) those fields of
-- names not read yet (seen), in at most one HMGET.
local function hmore(h, f, seen, names)
  local want = {}
  for _, n in ipairs(names) do
    if not seen[n] then want[#want + 1] = n; seen[n] = true end
  end
  if #want == 0 then return end
  local v = redis.call('HMGET', h, unpack(want))
  for i, n in ipairs(want) do f[n] = v[i] end
end

-- lease_due leases callout id, due at score (ms), of record c (its :q at
-- q) as its next attempt to token until lease_until (ms) at now_s, kind
-- 'probe' when probe, else 'first' ('replay' for a replay) or 'retry' by
-- its attempts, and adds the lease to zl (the lease set's ZADD pairs): 'd',
-- a dispatcher claimed it, so it was scheduled (complete.lua publishes its
-- completion event, contract §8). The one write of a claim (claim.lua,
-- claim_due). Returns the callout as claim.lua replies it (claimedOne: the
-- record before the claim, HGETALL order), nil when c has no record.
local function lease_due(c, q, id, score, probe, token, lease_until, now_s, zl)
  local all = redis.call('HGETALL', c)
  local r = {}
  for j = 1, #all, 2 do r[all[j]] = all[j + 1] end
  if not r.S then return nil end
  local n = num(r.n) + 1
  local kind = 'retry'
  if probe then
    kind = 'probe'
  elseif n == 1 then
    kind = 'first'
    if r.o then kind = 'replay' end
  end
  local fa = r.a or now_s
  redis.call('HSET', c, 'S', 'f', 'n', str(n), 't', token, 'x', lease_until, 'l', now_s,
    'k', kind_code[kind], 'd', '1', 'a', fa)
  zl[#zl + 1] = lease_until
  zl[#zl + 1] = id
  local e = {'id', id, 'kind', kind, 'attempts', n, 'first', fa, 'due', score, 'record', all, 'token', token}
  if r.Q then
    e[#e + 1] = 'rest'
    e[#e + 1] = redis.call('GET', q)
  end
  return e
end

-- claim_due claims, behind an open gate, up to want callouts of due set
-- due that are due at now (ms), in due order, under leases of lease_ms in
-- lease set lease: the claim complete.lua makes after its completions
-- (Completer.CompleteAndClaim). It reads the due set itself, so it needs
-- no re-check; a due id without a record is dropped from the due set, as
-- claim.lua does. Record keys are prefix .. id (the queue's slot), lease
-- tokens token .. '.' .. i. Returns the claimed (lease_due's), without
-- the queue: there is one.
local function claim_due(due, lease, prefix, token, want, now, lease_ms)
  local now_s, lease_until = str(now), str(now + lease_ms)
  local z = redis.call('ZRANGEBYSCORE', due, '-inf', now_s, 'WITHSCORES', 'LIMIT', 0, want)
  local out, ids, zl = {}, {}, {}
  for i = 1, #z, 2 do
    local id, c = z[i], prefix .. z[i]
    ids[#ids + 1] = id
    local tok = token .. '.' .. str(#out)
    local e = lease_due(c, c .. ':q', id, z[i + 1], false, tok, lease_until, now_s, zl)
    if e then out[#out + 1] = e end
  end
  if #ids > 0 then redis.call('ZREM', due, unpack(ids)) end
  if #zl > 0 then redis.call('ZADD', lease, unpack(zl)) end
  return out
end
