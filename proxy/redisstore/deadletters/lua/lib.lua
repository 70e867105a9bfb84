-- lib.lua: the helpers the dead-letter scripts share (mark.lua), prepended
-- to each after script.Clock, so every script loaded into Redis is one
-- self-contained chunk.

-- str writes a number of ms as an integer (never in exponent form).
local function str(n)
  return string.format('%d', n)
end

-- st_name maps a finished record's state code ('S', package record) to its
-- state's name (contract §4).
local st_name = {o = 'succeeded', x = 'failed', d = 'dead_lettered'}
