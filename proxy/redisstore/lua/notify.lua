-- notify.lua: a dead letter of a queue of a sharded endpoint (keys.go
-- "shards") happened outside the endpoint hash's slot; note it there: the
-- owner is told once per outage, with the outage's first dead letter
-- (contract §6), as complete.lua does for the home queue.
--
-- KEYS: 1 endpoint hash, 2 its shard's Salesforce outbox
-- ARGV: 1 now ms, 2 endpoint name, 3 the dead letter's id,
--       4 Salesforce outbox on '1'|'0'
-- Returns 1 when the owner is to be told now, else 0.
if redis.call('HEXISTS', KEYS[1], 'os') == 0 or redis.call('HSETNX', KEYS[1], 'on', '1') == 0 then
  return 0
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[2], 'NX', ARGV[1], 'o:' .. ARGV[2] .. ':' .. ARGV[3])
end
return 1
