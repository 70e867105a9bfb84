-- defer.lua: note record ids as reprocess requests due A.after from now on
-- Redis's clock (script.Clock); an id noted already gets the new time.
--
-- K and A: deferArgs (sfsub.go): K.again (ZSET record id -> due ms);
-- A.now (clock: 0, or a test's pinned ms), A.after (ms), A.ids.
-- Replies (countReply): n, how many ids were new.
local at = clock(A.now) + A.after
local n = 0
for _, id in ipairs(A.ids) do
  n = n + redis.call('ZADD', K.again, at, id)
end
return {'n', n}
