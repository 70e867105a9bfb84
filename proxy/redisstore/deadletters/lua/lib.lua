-- lib.lua: the helpers the dead-letter scripts share (mark.lua), prepended
-- to each after script.Clock and script.Numbers (str, num), so every script loaded into Redis is one
-- self-contained chunk.

-- st_name maps a finished record's state code ('S', package record) to its
-- state's name (contract §4).
local st_name = {o = 'succeeded', x = 'failed', d = 'dead_lettered'}
