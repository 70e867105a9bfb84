-- dl_prune.lua: the hourly sweep of an endpoint's dead-letter index
-- (ReplayStore.PruneDeadLetters): drop up to 100 entries older than the
-- dead-letter retention and release the backlog bytes their expired records
-- were charged (lib.lua dl_prune, dl_release).
--
-- KEYS: 1 endpoint hash, 2 dead-letter index, 3 dead-letter bytes
-- ARGV: 1 prune before ms
-- Returns how many entries were dropped (100: there may be more).
return dl_prune(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
