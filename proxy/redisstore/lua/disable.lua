-- disable.lua: mark an endpoint disabled (contract §6), once: reason and time
-- are written only by the call that disabled it. Its pending callouts are
-- moved to the dead letters afterwards by drain.lua, in bounded batches.
--
-- The owner is notified once per disable (contract §6), when someone is
-- there to tell (Options.Notify): with the Salesforce outbox on, the
-- notification is queued here, in the same script ('d:' endpoint ':' ms,
-- outbox.go).
--
-- KEYS: 1 endpoint hash, 2 Salesforce outbox
-- ARGV: 1 now ms, 2 reason, 3 endpoint name, 4 Salesforce outbox on '1'|'0',
--       5 someone can be told '1'|'0'
-- Returns 1 when this call disabled it, 0 when it already was.
if redis.call('HSETNX', KEYS[1], 'dis', '1') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'dr', ARGV[2], 'dat', ARGV[1])
gate_changed(KEYS[1])
if ARGV[4] == '1' and ARGV[5] == '1' then
  redis.call('ZADD', KEYS[2], 'NX', ARGV[1], 'd:' .. ARGV[3] .. ':' .. ARGV[1])
end
return 1
