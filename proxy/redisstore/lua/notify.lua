-- notify.lua: a dead letter of a queue of a sharded endpoint (keys.go
-- "shards") happened outside the endpoint hash's slot; apply lib.lua's
-- owner_notice to the endpoint hash, as complete.lua does for the home
-- queue.
--
-- KEYS: 1 endpoint hash, 2 its shard's Salesforce outbox
-- ARGV: 1 now ms, 2 endpoint name, 3 the dead letter's id,
--       4 Salesforce outbox on '1'|'0', 5 the dead-letter reason,
--       6 someone can be told '1'|'0' (Options.Notify)
-- Returns 1 when the owner is to be told now, else 0.
local f, w = hread(KEYS[1], {'os', 'on'}), {}
local sfo = ''
if ARGV[4] == '1' then sfo = KEYS[2] end
local told = owner_notice(f, w, sfo, ARGV[2], ARGV[3], ARGV[1], ARGV[5], ARGV[6] == '1')
hflush(KEYS[1], w)
return told
