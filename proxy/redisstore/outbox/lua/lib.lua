-- lib.lua: the two helpers the outbox scripts share, run after the script
-- layer's reader of K and A (proxy/redisstore/script) and before each
-- script's body.

-- str formats an integer for Redis (never in exponent form).
local function str(n)
  return string.format('%d', n)
end

-- num converts a reply value to a number; absent or empty is 0.
local function num(v)
  if not v or v == '' then return 0 end
  return tonumber(v)
end
