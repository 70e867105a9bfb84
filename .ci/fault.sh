#!/usr/bin/env bash
# The fault suite: SIGKILLed replicas and Redis under load, the
# Salesforce emulator down for a while, toxiproxy between proxy and upstream.
# Builds cmd/callout-proxy once (with the faultclock tag; the plain binary
# is CALLOUT_PROXY_BINARY's when set, as .ci/test.sh sets it); each test starts its own redis-server
# (appendonly yes, appendfsync always) on a free loopback port in a temp dir
# and stops it. The suite under 10 minutes, then the 10,000-request reprocess
# case (about 3 minutes) as a step of its own; loopback only.
#   bash .ci/fault.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v redis-server >/dev/null 2>&1 || { echo "fault.sh: redis-server is required (bash .ci/test.sh installs it)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
# The binary .ci/test.sh built (CALLOUT_PROXY_BINARY), else one of its own.
bin=${CALLOUT_PROXY_BINARY:-}
if [ -z "$bin" ]; then
  echo "== building callout-proxy for the fault suite"
  bin="$work/callout-proxy"
  go build -o "$bin" ./cmd/callout-proxy
fi
# The skew case runs replicas whose wall clocks are offset (build tag faultclock).
go build -tags faultclock -o "$work/callout-proxy-faultclock" ./cmd/callout-proxy
# The fsync durability level needs WAITAOF (Redis 7.2+); Debian bookworm has
# 7.0, so Valkey from trixie is fetched beside the system (fetch-valkey.sh
# touches no apt state of the machine). Without it those cases skip, said here.
if v=$(bash proxy/internal/redistest/fetch-valkey.sh "$work/valkey" 2>"$work/valkey.log"); then
  eval "$v"
  echo "== fsync cases on $("$CALLOUT_TEST_REDIS72_SERVER" --version | head -1)"
else
  echo "== Valkey could not be fetched: the fsync cases skip"; tail -3 "$work/valkey.log"
fi
export CALLOUT_FAULT_BINARY="$bin" CALLOUT_FAULT_CLOCK_BINARY="$work/callout-proxy-faultclock"
. .ci/lib.sh
# One test binary for every run below.
go test -c -tags fault -vet=off -o "$work/fault.test" ./proxy/internal/fault/
# run NAME TIMEOUT ARGS…: one run of the fault tests (test binary flags), its
# log kept and summarised (quiet_v); the fault package's directory is the
# working directory, as under go test.
run() {
  local name=$1 timeout=$2; shift 2
  echo "== $name"
  quiet_v "$work/$name.log" bash -c 'cd proxy/internal/fault && exec "$@"' _ \
    "$work/fault.test" -test.count=1 -test.timeout "$timeout" -test.v "$@"
}
# The two Salesforce cases that mostly wait (the token revoked for two
# minutes; the login page and maintenance windows: about 165 s of the
# suite's 330, nearly all of it waiting on real time for the proxy's token
# backoff) run beside the rest in a second process: each case has its own
# Redis, replicas, emulator and ports, so they share nothing but the cores.
# Each run's log is printed when both have ended, one after the other, so
# their lines never interleave.
idle='^(TestSalesforceTokenRevoked|TestSalesforceLoginPageAndMaintenance)$'
rc=0
( run fault-suite-waits 9m -test.run "$idle" >"$work/waits.out" 2>&1 ) &
waits=$!
run fault-suite 9m -test.skip "^TestSalesforceReprocessAtOnce\$|$idle" || rc=$?
wait "$waits" || rc=$?
cat "$work/waits.out"
# 10,000 reprocess requests at once (docs/salesforce.md): about 3 minutes on
# its own, so outside the suite's 10-minute budget, in a step of its own.
CALLOUT_FAULT_REPROCESS_N=10000 run salesforce-reprocess-10000 6m -test.run '^TestSalesforceReprocessAtOnce$' || rc=$?
exit "$rc"
