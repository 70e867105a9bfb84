-- lib2.lua: helpers of the compact callout record, layout 2 (keys.go,
-- record2.go). The store prepends lib.lua and this file to every script.
--
-- A layout-2 record is one hash with one-letter fields, kept in Redis's
-- compact listpack encoding (every value at most 64 bytes):
--   S state code (st below), n attempts, i issuer tag, b bytes charged to
--   the backlog, m m2 … the packed meta (Go only: method, endpoint, path,
--   query, key, source, created, trace context), 1 … 8 the packed headers
--   and body in 64-byte chunks (or Q = '1' and the whole of them in the key :q),
--   o replay_of, a first attempt ms, t x l k the lease (token, until,
--   started, kind code), d '1' once a dispatcher claimed it, A<n> attempt
--   n ("kind started_ms duration_ms status outcome error"), R last
--   response status (the response itself: key :r), e last error,
--   F finished ms, D dead-letter reason, rb rt the replay mark, r1 … r4 the
--   last response in chunks (or the key :r when longer).
-- A field a script drops is blanked ('' reads as absent, present() below),
-- so a record is always written with one HSET and never an HDEL.
-- Scripts never parse m or the chunks; they copy, keep or blank them.

-- st_code maps a state to its code in 'S'.
local st_code = {scheduled = 's', held = 'h', in_flight = 'f', succeeded = 'o',
  failed = 'x', dead_lettered = 'd'}
local st_name = {s = 'scheduled', h = 'held', f = 'in_flight', o = 'succeeded',
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
-- counter hash (the endpoint hash for its home queue, keys.go).
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
-- 'bi' pending items of the queue (layout-2 callouts: legacy ones are
-- counted in their sets), 'ib:'/'ii:' tag the issuer's share. A counter
-- that reaches 0 or less is dropped, so an idle queue keeps no counter
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

-- gate_in is the gate a layout-2 script acts on and when it may open: the
-- gate of the endpoint hash's fields f (gate_of) when the script runs in
-- the endpoint hash's slot (given is ''); else given and until_s, the gate
-- the caller read from the endpoint hash (a queue of a sharded endpoint,
-- keys.go "shards").
local function gate_in(f, given, until_s, now)
  if given == '' then return gate_of(f, now) end
  return given, num(until_s)
end

-- pending_items counts the callouts pending in the due and lease sets
-- given (scheduled, held, in flight).
local function pending_items(sets)
  local n = 0
  for _, k in ipairs(sets) do n = n + redis.call('ZCARD', k) end
  return n
end

-- expire2 sets the TTL ms of a finished layout-2 callout's record, its
-- long response (keys.r; keys.c when it has none) and its reservation
-- (keys.res; keys.c when it has none or its TTL is already right,
-- complete.lua).
local function expire2(keys, ttl)
  redis.call('PEXPIRE', keys.c, ttl)
  if keys.r ~= keys.c then redis.call('PEXPIRE', keys.r, ttl) end
  if keys.res ~= keys.c then redis.call('PEXPIRE', keys.res, ttl) end
end

-- finish_blanks are the record fields finish2 blanks (made once per
-- script call, not per completion).
local finish_blanks = concat(lease_fields, rest_fields, {'b', 'Q', 'd'})

-- finish2 ends a layout-2 callout succeeded or failed (code 'o' or 'x'): it
-- keeps what an idempotent replay and its status document need (meta,
-- status, response, attempts, times) but not the request's headers and
-- body (contract §5), releases every byte it was charged and its pending item
-- (acc_add on the counters fa, writes in wa), and sets the TTLs. rec are
-- its fields as read (S, b, i, Q, the lease and the chunks at least: hall); wc
-- collects the record's writes.
local function finish2(keys, rec, wc, fa, wa, code, now_s, ttl)
  acc_add(fa, wa, rec.i, -num(rec.b), -1)
  if present(rec.Q) then redis.call('DEL', keys.q) end
  put(rec, wc, 'S', code)
  put(rec, wc, 'F', now_s)
  for _, n in ipairs(finish_blanks) do blank(rec, wc, n) end
  hflush(keys.c, wc)
  expire2(keys, ttl)
end

-- dead_letter2 ends a layout-2 callout as a dead letter: it keeps
-- everything, still charged, until discard or expiry (dl_release), counts
-- one pending item less, indexes it (dl, its charge noted in dlb) and
-- prunes up to two index entries older than prune_before (ms) on the way
-- (the hourly sweep does the rest, dl_prune.lua), releasing their bytes
-- from the counters and their issuer's share: more(names) reads the
-- counter fields names into fa first (an entry may be another issuer's).
local function dead_letter2(keys, rec, wc, fa, wa, id, reason, now_s, ttl, prune_before, more)
  put(rec, wc, 'S', 'd')
  put(rec, wc, 'F', now_s)
  put(rec, wc, 'D', reason)
  for _, n in ipairs(lease_fields) do blank(rec, wc, n) end
  acc_add(fa, wa, rec.i, 0, -1)
  hflush(keys.c, wc)
  expire2(keys, ttl)
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
