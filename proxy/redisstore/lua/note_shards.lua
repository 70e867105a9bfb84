-- note_shards.lua: record that an endpoint is served with n shards
-- (shards.go), so that replicas configured with another count still serve
-- every queue that may hold its callouts.
--
-- KEYS: 1 endpoint hash
-- ARGV: 1 n
-- Returns the comma-separated shard counts recorded ('sq').
local cur = redis.call('HGET', KEYS[1], 'sq') or ''
for p in string.gmatch(cur, '[^,]+') do
  if p == ARGV[1] then return cur end
end
if cur == '' then cur = ARGV[1] else cur = cur .. ',' .. ARGV[1] end
redis.call('HSET', KEYS[1], 'sq', cur)
return cur
