-- reap.lua: return expired leases to the due set (ARCHITECTURE.md "A reaper returns
-- expired leases"). Step one, a plain ZRANGEBYSCORE lease -inf now LIMIT 0 n,
-- found the candidates; this script re-checks each.
--
-- A reaped callout gets an attempt entry {kind, started_at, outcome
-- retryable, error lease_expired}, loses its lease token (so the lost
-- worker's Complete is stale), and is due now (held when the gate is shut).
-- The attempt count is NOT decremented: the lost attempt may have reached
-- the upstream, so it counts as a real dispatch (a crash between claim and
-- dispatch over-counts by one). A reaped probe releases the probe token.
--
-- KEYS: 1 due, 2 lease, 3 endpoint hash, then per candidate i:
--       KEYS[2+2i] its record, KEYS[3+2i] its attempt log
-- ARGV: 1 now ms, then ARGV[1+i] the id of candidate i
-- Returns the ids reaped.
local due, lease, ep = KEYS[1], KEYS[2], KEYS[3]
local now_s = ARGV[1]
local now = tonumber(now_s)

local out = {}
for i = 1, (#KEYS - 3) / 2 do
  local c, l, id = KEYS[2 + 2 * i], KEYS[3 + 2 * i], ARGV[1 + i]
  local score = redis.call('ZSCORE', lease, id)
  if score and tonumber(score) <= now then
    redis.call('ZREM', lease, id)
    local f = redis.call('HMGET', c, 's', 'lt', 'n', 'lk', 'ls')
    if f[1] == 'in_flight' then
      local started = num(f[5])
      append_attempt(c, ep, l, '{"n":' .. str(num(f[3])) .. ',"kind":"' .. (f[4] or 'retry') ..
        '","started_at":' .. str(started) .. ',"duration_ms":' .. str(now - started) ..
        ',"outcome":"retryable","error":"lease_expired"}')
      if f[2] and redis.call('HGET', ep, 'pt') == f[2] then
        redis.call('HDEL', ep, 'pt', 'pe')
      end
      local g, g_until = gate(ep, now)
      local state, at = 'scheduled', now_s
      if shut(g) then
        state = 'held'
        if g_until > now then at = str(g_until) end
      end
      redis.call('ZADD', due, at, id)
      redis.call('HSET', c, 's', state, 'na', at)
      redis.call('HDEL', c, 'lt', 'lx', 'ls', 'lk')
      out[#out + 1] = id
    end
  end
end
return out
