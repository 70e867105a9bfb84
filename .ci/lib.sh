# Sourced by the suite's scripts (.ci/fault.sh, .ci/hostile.sh,
# deploy/check.sh).

# quiet_v LOG CMD [ARG…]: runs CMD, a go test -v, with its output kept in
# LOG; prints LOG's result lines (=== RUN, --- PASS/FAIL/SKIP of tests and
# subtests, which proxy/internal/testsum counts, and the tests' own
# file:line logs) when CMD passed, the whole of LOG when it failed (the
# proxies' and servers' logs with it). Returns CMD's exit status.
quiet_v() {
  local log=$1 rc=0
  shift
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok)|_test\.go:[0-9]+:' "$log" || true
  else
    cat "$log"
  fi
  return "$rc"
}
