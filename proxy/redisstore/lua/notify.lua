-- notify.lua: a dead letter of a queue of a sharded endpoint (keyspace
-- "shards") happened outside the endpoint hash's slot; apply lib.lua's
-- owner_notice to the endpoint hash, as complete.lua does for the home
-- queue.
--
-- K and A: notifyArgs (complete.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash), K.sfo (its shard's Salesforce outbox);
-- A.now (lib.lua clock), A.name (the endpoint), A.id (the dead letter), A.outbox,
-- A.reason (the dead-letter reason), A.can (someone can be told,
-- Options.Notify).
-- Replies (toldReply): told, 1 when the owner is to be told now, else 0.
local f, w = hread(K.endpoint, {'os', 'on'}), {}
local sfo = ''
if A.outbox then sfo = K.sfo end
local told = owner_notice(f, w, sfo, A.name, A.id, str(clock(A.now)), A.reason, A.can)
hflush(K.endpoint, w)
return {'told', told}
