-- gate_read.lua: an endpoint's gate and breaker state at now, computed by
-- lib.lua's gate_of() and breaker_state() — the one owner of the rule — for
-- Go readers (EndpointState, Get, the gate view of sharded queues, ReadGates
-- for the gate cache) that must not compute it themselves.
--
-- K and A: gateReadArgs (endpoint.go), read by the script layer (script/):
-- K.endpoint (the endpoint hash); A.now (lib.lua clock), A.part (a breaker
-- partition, '' the endpoint's own breaker, contract §6), A.list (list the
-- partitions, below).
-- Replies (gateReadReply): gate, gate_until (ms, 0: none), level (the
-- partition whose breaker the gate is, '' the endpoint's), breaker
-- (closed|open|half_open: the endpoint's own), failures (consecutive, the
-- endpoint's, or the partition's when it has more, as admit.lua),
-- last_success (ms, 0: none: lsu, lib.lua breaker_apply), and partitions (with A.list): every partition with a breaker of its own in the hash, {tag,
-- breaker, failures, opened_at, probe_at (ms)}.
local now, part = clock(A.now), A.part
local f = hread(K.endpoint, concat(gate_fields_of(part), {'cf', pf('cf', part), 'lsu'}))
local g, u, level = gate_of(f, now, part)
local parts = {}
local all = {}
if A.list then all = redis.call('HGETALL', K.endpoint) end
for i = 1, #all, 2 do
  local p = string.match(all[i], '^cf:(.+)$') or string.match(all[i], '^bs:(.+)$')
  if p and not parts[p] then
    local pb, pa = redis.call('HGET', K.endpoint, 'bs:' .. p), redis.call('HGET', K.endpoint, 'pa:' .. p)
    parts[p] = {'tag', p, 'breaker', breaker_state(pb, pa, now), 'failures',
      num(redis.call('HGET', K.endpoint, 'cf:' .. p)), 'opened_at', num(redis.call('HGET', K.endpoint, 'oa:' .. p)),
      'probe_at', num(pa)}
  end
end
local list = {}
for _, v in pairs(parts) do list[#list + 1] = v end
table.sort(list, function(a, b) return a[2] < b[2] end)
return {'gate', g, 'gate_until', u, 'level', level, 'breaker', breaker_state(f.bs, f.pa, now),
  'failures', math.max(num(f.cf), num(f[pf('cf', part)])), 'last_success', num(f.lsu), 'partitions', list}
