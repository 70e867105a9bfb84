#!/usr/bin/env bash
# The fault suite: SIGKILLed replicas and Redis under load, the
# Salesforce emulator down for a while, toxiproxy between proxy and upstream.
# Builds cmd/callout-proxy once; each test starts its own redis-server
# (appendonly yes, appendfsync always) on a free loopback port in a temp dir
# and stops it. Under 10 minutes; loopback only.
#   bash .ci/fault.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v redis-server >/dev/null 2>&1 || { echo "fault.sh: redis-server is required (bash .ci/test.sh installs it)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
echo "== building callout-proxy for the fault suite"
go build -o "$work/callout-proxy" ./cmd/callout-proxy
# The skew case runs replicas whose wall clocks are offset (build tag faultclock).
go build -tags faultclock -o "$work/callout-proxy-faultclock" ./cmd/callout-proxy
echo "== fault suite"
rc=0
CALLOUT_FAULT_BINARY="$work/callout-proxy" CALLOUT_FAULT_CLOCK_BINARY="$work/callout-proxy-faultclock" go test -tags fault -count=1 -timeout 9m -v ./proxy/internal/fault/ \
  >"$work/fault.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|_test\.go:[0-9]+:' "$work/fault.log"
else
  cat "$work/fault.log"
fi
exit "$rc"
