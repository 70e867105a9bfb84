#!/usr/bin/env bash
# The fault suite: SIGKILLed replicas and Redis under load, the
# Salesforce emulator down for a while, toxiproxy between proxy and upstream.
# Builds cmd/callout-proxy once (with the faultclock tag; the plain binary
# is CALLOUT_PROXY_BINARY's when set, as .ci/test.sh sets it) and the fault
# test binary; each test starts its own redis-server (appendonly yes,
# appendfsync always) on a free loopback port in a temp dir and stops it;
# loopback only. Three parts:
#   waits  the two Salesforce cases that mostly wait on real time (the token
#          revoked for two minutes; the login page and maintenance windows:
#          about 165 s, nearly all of it the proxy's token backoff);
#   rest   every other case, beside the 10,000-request reprocess case (about
#          90 s alone) in a second process;
#   all    (the default) waits beside rest.
# Each part's processes share nothing but the cores (every case has its own
# Redis, replicas, emulator and ports); their logs are printed one after the
# other when they have ended, so lines never interleave. .ci/test.sh starts
# `waits` in the background beside go test (it needs no CPU) and runs `rest`
# as the fault step; CALLOUT_FAULT_WORK, when set, is the directory the
# binaries are built in once and shared by the parts (a lock orders them).
#   bash .ci/fault.sh [all|waits|rest]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v redis-server >/dev/null 2>&1 || { echo "fault.sh: redis-server is required (bash .ci/test.sh installs it)"; exit 1; }

mode=${1:-all}
case "$mode" in all|waits|rest) ;; *) echo "fault.sh: unknown part $mode (all, waits or rest)"; exit 2 ;; esac
if [ -n "${CALLOUT_FAULT_WORK:-}" ]; then
  work=$CALLOUT_FAULT_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work" 2>/dev/null || true' EXIT
fi
# build: the binaries and Valkey, once per work directory (the first part
# to take the lock builds them; the next finds them).
build() {
  # The binary .ci/test.sh built (CALLOUT_PROXY_BINARY), else one of its own.
  local bin=${CALLOUT_PROXY_BINARY:-}
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
    echo "$v" >"$work/valkey.env"
  else
    echo "== Valkey could not be fetched: the fsync cases skip"; tail -3 "$work/valkey.log"
    : >"$work/valkey.env"
  fi
  echo "export CALLOUT_FAULT_BINARY='$bin' CALLOUT_FAULT_CLOCK_BINARY='$work/callout-proxy-faultclock'" >"$work/bin.env"
  # One test binary for every run below.
  go test -c -tags fault -vet=off -o "$work/fault.test" ./proxy/internal/fault/
  touch "$work/built"
}
exec 9>"$work/build.lock"
flock 9
[ -f "$work/built" ] || build
flock -u 9
eval "$(cat "$work/bin.env" "$work/valkey.env")"
[ -z "${CALLOUT_TEST_REDIS72_SERVER:-}" ] || echo "== fsync cases on $("$CALLOUT_TEST_REDIS72_SERVER" --version | head -1)"
. .ci/lib.sh
# run NAME TIMEOUT ARGS…: one run of the fault tests (test binary flags), its
# log kept and summarised (quiet_v); the fault package's directory is the
# working directory, as under go test.
run() {
  local name=$1 timeout=$2; shift 2
  echo "== $name"
  quiet_v "$work/$name.log" bash -c 'cd proxy/internal/fault && exec "$@"' _ \
    "$work/fault.test" -test.count=1 -test.timeout "$timeout" -test.v "$@"
}
idle='^(TestSalesforceTokenRevoked|TestSalesforceLoginPageAndMaintenance)$'
reprocess='^TestSalesforceReprocessAtOnce$'
# waits: the idle cases alone.
waits() { run fault-suite-waits 9m -test.run "$idle"; }
# rest: every other case beside the 10,000 reprocess requests at once
# (docs/salesforce.md).
rest() {
  local rc=0 pid
  ( CALLOUT_FAULT_REPROCESS_N=10000 run salesforce-reprocess-10000 6m -test.run "$reprocess" \
      >"$work/reprocess.out" 2>&1 ) &
  pid=$!
  run fault-suite 9m -test.skip "$reprocess|$idle" || rc=$?
  wait "$pid" || rc=$?
  cat "$work/reprocess.out"
  return "$rc"
}
case "$mode" in
  waits) waits ;;
  rest) rest ;;
  all)
    rc=0
    ( waits >"$work/waits.out" 2>&1 ) &
    pid=$!
    rest || rc=$?
    wait "$pid" || rc=$?
    cat "$work/waits.out"
    exit "$rc"
    ;;
esac
