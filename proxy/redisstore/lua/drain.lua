-- drain.lua: turn one bounded batch of a disabled endpoint's due
-- callouts (scheduled or held) into dead letters with reason
-- endpoint_disabled (contract §6). Callouts in flight are left to their worker:
-- their completion or their reaping brings them back here.
--
-- KEYS: 1 counters (the endpoint hash, or the queue's counter hash),
--       2 due, 3 dead-letter index, 4 Salesforce outbox, 5 its expiry
--       schedule (outbox.go), 6 dead-letter bytes, then per callout i four
--       keys from KEYS[4i+3]: its record, :q, :r, and its reservation (the
--       record key as a placeholder when it has none)
-- ARGV: 1 now ms, 2 dead-letter TTL ms, 3 prune index before ms,
--       4 Salesforce outbox on '1'|'0', 5 gate ('' read it from KEYS[1];
--       else the gate the caller read), then ARGV[5+i] the id of callout i
-- Returns the ids dead-lettered ({} when the endpoint is not disabled).
local acc, due, dl, sfo, sfx, dlb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local fa, wa, seen = {}, {}, {}
if ARGV[5] == '' then
  hmore(acc, fa, seen, {'dis'})
  if fa.dis ~= '1' then return {} end
elseif ARGV[5] ~= 'disabled' then
  return {}
end
local out = {}
for i = 1, (#KEYS - 6) / 4 do
  local j = 4 * i + 3
  local keys = {c = KEYS[j], q = KEYS[j + 1], r = KEYS[j + 2], res = KEYS[j + 3], dl = dl, dlb = dlb}
  local id = ARGV[5 + i]
  if redis.call('ZREM', due, id) == 1 then
    local rec, wc = hread(keys.c, {'S', 'b', 'i', 'Q', 'd'}), {}
    if rec.S then
      hmore(acc, fa, seen, counter_names(rec.i or ''))
      dead_letter(keys, rec, wc, fa, wa, id, 'endpoint_disabled', ARGV[1], ARGV[2], ARGV[3],
        function(names) hmore(acc, fa, seen, names) end)
      -- Salesforce outbox in the same script (outbox.go); a due callout was
      -- scheduled, so its ending publishes a completion event (contract §8).
      if ARGV[4] == '1' then outbox_dead_letter(keys.c, sfo, sfx, id, ARGV[1], ARGV[2], true) end
      out[#out + 1] = id
    end
  end
end
hflush(acc, wa)
return out
