-- drain.lua: turn one bounded batch of a disabled endpoint's due callouts
-- (scheduled or held) into dead letters with reason endpoint_disabled
-- (contract §6). Callouts in flight are left to their worker: their completion
-- or their reaping brings them back here.
--
-- KEYS: 1 endpoint hash, 2 due, 3 dead-letter index, 4 Salesforce outbox,
--       5 its expiry schedule (outbox.go), 6 dead-letter bytes, then per
--       callout i five keys from KEYS[5i+2]: its record, body, attempt log,
--       response, and its
--       idempotency key (or the endpoint hash as a placeholder when it has
--       none)
-- ARGV: 1 now ms, 2 dead-letter TTL ms, 3 prune index before ms,
--       4 Salesforce outbox on '1'|'0', then ARGV[4+i] the id of callout i
-- Returns the ids dead-lettered ({} when the endpoint is not disabled).
local ep, due, dl, sfo, sfx, dlb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if redis.call('HGET', ep, 'dis') ~= '1' then return {} end
local out = {}
for i = 1, (#KEYS - 6) / 5 do
  local j = 5 * i + 2
  local p = {KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3]}
  local idem, id = KEYS[j + 4], ARGV[4 + i]
  if redis.call('ZREM', due, id) == 1 and redis.call('EXISTS', p[1]) == 1 then
    dead_letter(p, ep, dl, dlb, idem, id, ARGV[1], 'endpoint_disabled', ARGV[2], ARGV[3])
    -- Salesforce outbox in the same script (outbox.go); a due callout was
    -- scheduled, so its ending publishes a completion event (contract §8).
    if ARGV[4] == '1' then outbox_dead_letter(p[1], sfo, sfx, id, ARGV[1], ARGV[2], true) end
    out[#out + 1] = id
  end
end
return out
