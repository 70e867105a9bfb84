-- until.lua: store the end of a hold on Salesforce writes, on Redis's
-- clock (script.Clock): the pause of every write (K.key a string with the
-- end as its value and the hold as its TTL, A.field '') or a deferral of
-- one scope (K.key the deferrals hash, A.field its 'u:' field). The
-- caller passes the hold as a duration (info.go Pause, flush.go Defer).
--
-- K and A: untilArgs (flush.go): K.key; A.field, A.now (0, or a test's
-- pinned now in Unix ms), A.hold (ms, > 0).
-- Replies (untilReply): until (Unix ms), the stored end.
local till = str(clock(A.now) + A.hold)
if A.field == '' then
  redis.call('SET', K.key, till, 'PX', A.hold)
else
  redis.call('HSET', K.key, A.field, till)
end
return {'until', till}
