#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, starts a
# throwaway Redis (a single node and a 3-master Redis Cluster on free loopback
# ports), runs the Go checks and tests against them, and cleans up. It ends
# with one line, "== N passed, N failed, N skipped", over every Go test it
# ran (proxy/internal/testsum counts them), and naming the step it stopped at
# when one failed; its exit status is the failing step's.
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
tally="$work/tally" # the Go test results so far (testsum)
step="setup"
# begin names the step that runs now, for the closing line.
begin() { step="$1"; echo "== $1"; }
# The suite's own exit status is kept: cleaning up must never turn a pass
# into a failure (a redis-server still flushing its files into $work made the
# rm fail once), nor hide a failure.
cleanup() {
  local rc=$?
  bash proxy/internal/redistest/start-redis.sh --stop "$work" || true
  local line="no Go test ran"
  [ -x "$work/testsum" ] && line=$("$work/testsum" total "$tally" 2>/dev/null || echo "$line")
  if [ "$rc" -eq 0 ]; then
    echo "== $line"
  else
    echo "== $line; the suite stopped at: $step (exit $rc)"
  fi
  rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work" || true; }
  exit "$rc"
}
trap cleanup EXIT
go build -o "$work/testsum" ./proxy/internal/testsum

begin "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
begin "go vet (and the files behind the fault, sizing and hostile build tags)"
go vet ./...
go vet -tags fault,sizing,hostile ./proxy/internal/fault/ ./deploy/sizing/ ./proxy/internal/hostile/

begin "Apex checks (parse, format, metadata)"
bash apex-stubs/check.sh

begin "deploy checks (static builds, promtool, metrics named by alerts, kustomize, helm, compose)"
bash deploy/check.sh

begin "starting throwaway Redis (single node + 3-master cluster)"
eval "$(bash proxy/internal/redistest/start-redis.sh "$work")"
export CALLOUT_TEST_REQUIRE_REAL=1

begin "go test (unit and integration)"
go test -race -count=1 -timeout 15m -json ./... | "$work/testsum" json "$tally"

begin "sizing measurement (Redis round trips per request, bytes per record; behind the sizing build tag)"
go test -count=1 -timeout 10m -tags sizing -json ./deploy/sizing/ | "$work/testsum" json "$tally"

begin "fault suite (SIGKILLed replicas and Redis, Salesforce down, toxiproxy)"
bash .ci/fault.sh | "$work/testsum" text "$tally"

begin "hostile suite (idle connections, slow callers, huge headers and bodies, answers never read; real client libraries)"
bash .ci/hostile.sh | "$work/testsum" text "$tally"

begin "ops console in headless Chromium (real binary, real Redis; installs chromium and playwright-core)"
bash proxy/admin/console/e2e/run.sh
