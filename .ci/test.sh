#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, starts a
# throwaway Redis (a single node and a 3-master Redis Cluster on free loopback
# ports), runs the Go checks and tests against them, and cleans up.
#   bash .ci/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if ((${#need_apt[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "== installing ${need_apt[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

work=$(mktemp -d)
# The suite's own exit status is kept: cleaning up must never turn a pass
# into a failure (a redis-server still flushing its files into $work made the
# rm fail once), nor hide a failure.
cleanup() {
  local rc=$?
  bash proxy/internal/redistest/start-redis.sh --stop "$work" || true
  rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work" || true; }
  exit "$rc"
}
trap cleanup EXIT

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet (and the files behind the fault, sizing and hostile build tags)"
go vet ./...
go vet -tags fault,sizing,hostile ./proxy/internal/fault/ ./deploy/sizing/ ./proxy/internal/hostile/

echo "== Apex checks (parse, format, metadata)"
bash apex-stubs/check.sh

echo "== deploy checks (static builds, promtool, metrics named by alerts, kustomize, helm, compose)"
bash deploy/check.sh

echo "== starting throwaway Redis (single node + 3-master cluster)"
eval "$(bash proxy/internal/redistest/start-redis.sh "$work")"
export CALLOUT_TEST_REQUIRE_REAL=1

echo "== go test (unit and integration)"
go test -race -count=1 -timeout 15m ./...

echo "== sizing measurement (Redis round trips per request, bytes per record; behind the sizing build tag)"
go test -count=1 -timeout 10m -tags sizing ./deploy/sizing/

echo "== fault suite (SIGKILLed replicas and Redis, Salesforce down, toxiproxy)"
bash .ci/fault.sh

echo "== hostile suite (idle connections, slow callers, huge headers and bodies, answers never read; real client libraries)"
bash .ci/hostile.sh

echo "== ops console in headless Chromium (real binary, real Redis; installs chromium and playwright-core)"
bash proxy/admin/console/e2e/run.sh
