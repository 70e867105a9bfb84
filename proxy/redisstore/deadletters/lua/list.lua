-- list.lua: one page of an endpoint's dead-letter index, ordered by
-- (dead-lettered at, id), atomically, so concurrent pruning cannot shift
-- the page. Read-only.
--
-- K and A: listArgs (deadletters.go), read by the script layer
-- (script/): K.dl (the dead-letter index); A.since_ms, A.until_ms,
-- A.cursor_ms ('' = first page), A.cursor_id, A.limit.
-- Replies (listReply): entries, {id, ms, id, ms, ...}: up to
-- limit+1 entries after the cursor (or from since) and not after until; a
-- (limit+1)th says there is more.

-- le reports a <= b bytewise, as Redis orders members (not by locale).
local function le(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

local dl = K.dl
local start
if A.cursor_ms == '' then
  start = redis.call('ZCOUNT', dl, '-inf', '(' .. A.since_ms)
else
  local r = redis.call('ZRANK', dl, A.cursor_id)
  local sc = redis.call('ZSCORE', dl, A.cursor_id)
  if r and sc and tonumber(sc) == tonumber(A.cursor_ms) then
    start = r + 1
  else
    -- the cursor's entry is gone: count what sorts at or before it
    start = redis.call('ZCOUNT', dl, '-inf', '(' .. A.cursor_ms)
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', dl, A.cursor_ms, A.cursor_ms)) do
      if le(m, A.cursor_id) then start = start + 1 end
    end
  end
end
local r = redis.call('ZRANGE', dl, start, start + A.limit, 'WITHSCORES')
local out = {}
local until_ms = A.until_ms
for i = 1, #r, 2 do
  if tonumber(r[i + 1]) > until_ms then break end
  out[#out + 1] = r[i]
  out[#out + 1] = r[i + 1]
end
return {'entries', out}
