-- dead_letters.lua: one page of an endpoint's dead-letter index, ordered by
-- (dead-lettered at, id), atomically, so concurrent pruning cannot shift
-- the page. Read-only.
--
-- KEYS: 1 dead-letter index
-- ARGV: 1 since ms, 2 until ms, 3 cursor ms ('' = first page), 4 cursor id,
--       5 limit
-- Returns {id, ms, id, ms, ...}: up to limit+1 entries after the cursor
-- (or from since) and not after until; a (limit+1)th says there is more.

-- le reports a <= b bytewise, as Redis orders members (not by locale).
local function le(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

local dl = KEYS[1]
local start
if ARGV[3] == '' then
  start = redis.call('ZCOUNT', dl, '-inf', '(' .. ARGV[1])
else
  local r = redis.call('ZRANK', dl, ARGV[4])
  local sc = redis.call('ZSCORE', dl, ARGV[4])
  if r and sc and tonumber(sc) == tonumber(ARGV[3]) then
    start = r + 1
  else
    -- the cursor's entry is gone: count what sorts at or before it
    start = redis.call('ZCOUNT', dl, '-inf', '(' .. ARGV[3])
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', dl, ARGV[3], ARGV[3])) do
      if le(m, ARGV[4]) then start = start + 1 end
    end
  end
end
local r = redis.call('ZRANGE', dl, start, start + tonumber(ARGV[5]), 'WITHSCORES')
local out = {}
local until_ms = tonumber(ARGV[2])
for i = 1, #r, 2 do
  if tonumber(r[i + 1]) > until_ms then break end
  out[#out + 1] = r[i]
  out[#out + 1] = r[i + 1]
end
return out
