#!/usr/bin/env bash
# The hostile-caller suite: idle connections beyond the cap,
# slow headers and bodies, 1 MB headers x 400, 60 KiB headers x 400 keyed
# writes, 12 MiB bodies x 80, 11 MiB responses x 100 (read, and never read),
# one organisation's timeouts and backlog on an endpoint shared with others
# against the real binary, with /healthz, the admin listener and a second
# org's small callout asked every 100 ms (each within 1 s) and the proxy's
# RSS and Redis's growth measured; then real client libraries through the
# proxy: stripe-go, go-retryablehttp, and Python's requests with urllib3's
# Retry (installs python3-requests from Debian when python3 lacks it). Builds cmd/callout-proxy once (unless CALLOUT_PROXY_BINARY names one); starts its own
# redis-server on a free loopback port. About 40 s; under 5 minutes;
# loopback only.
#   bash .ci/hostile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v redis-server >/dev/null 2>&1 || { echo "hostile.sh: redis-server is required (bash .ci/test.sh installs it)"; exit 1; }

# The idle-connection attack opens max_connections (2048) + 500 connections
# while the proxy holds up to 2049 of its own: both processes need about
# 2,600 descriptors on top of the usual. Raise the soft limit when it is
# lower than 8192 (to the hard limit at most).
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
  hard=$(ulimit -Hn)
  if [ "$hard" = unlimited ] || [ "$hard" -ge 8192 ]; then ulimit -n 8192; else ulimit -n "$hard"; fi
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 6000 ]; then
  echo "hostile.sh: ulimit -n is $(ulimit -n); the suite needs at least 6000 open files"; exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
# The binary .ci/test.sh built (CALLOUT_PROXY_BINARY), else one of its own.
bin=${CALLOUT_PROXY_BINARY:-}
if [ -z "$bin" ]; then
  echo "== building callout-proxy for the hostile suite"
  bin="$work/callout-proxy"
  go build -o "$bin" ./cmd/callout-proxy
fi
echo "== hostile suite (ulimit -n $(ulimit -n))"
. .ci/lib.sh
rc=0
CALLOUT_HOSTILE_BINARY="$bin" quiet_v "$work/hostile.log" go test -tags hostile -count=1 -timeout 5m -v \
  ./proxy/internal/hostile/ || rc=$?
# The Python caller needs requests and urllib3: the machine's python3 may
# have them (pip); else Debian's, for Debian's own interpreter.
py=python3
if ! "$py" -c 'import requests, urllib3' 2>/dev/null; then
  py=/usr/bin/python3
  if ! "$py" -c 'import requests, urllib3' 2>/dev/null; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "== installing python3-requests"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-requests >/dev/null
  fi
fi
echo "== real client libraries through the proxy (proxy/internal/realclients, its own module: stripe-go, go-retryablehttp; requests + urllib3 with $py)"
(cd proxy/internal/realclients && CALLOUT_PROXY_BINARY="$bin" CALLOUT_PYTHON="$py" \
  CALLOUT_REQUIRE_PYTHON_CLIENTS=1 quiet_v "$work/realclients.log" go test -count=1 -timeout 4m -v ./...) || rc=$?
exit "$rc"
