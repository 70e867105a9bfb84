-- note_shards.lua: record that an endpoint is served with n shards
-- (queues.go), so that replicas configured with another count still serve
-- every queue that may hold its callouts.
--
-- K and A: noteShardsArgs (queues.go), read by the script layer
-- (script/): K.endpoint (the endpoint hash); A.n (the shard count).
-- Replies (noteShardsReply): counts, the comma-separated shard counts
-- recorded ('sq').
local cur = redis.call('HGET', K.endpoint, 'sq') or ''
for p in string.gmatch(cur, '[^,]+') do
  if p == A.n then return {'counts', cur} end
end
if cur == '' then cur = A.n else cur = cur .. ',' .. A.n end
redis.call('HSET', K.endpoint, 'sq', cur)
return {'counts', cur}
