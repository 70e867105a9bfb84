#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, starts a
# throwaway Redis (a single node and a 3-master Redis Cluster on free loopback
# ports), runs every check and test against them, and cleans up. Every step
# runs under proxy/internal/testsum, which counts its results: go test's
# (-json and -v), the "ok - …" / "not ok - …" lines of the browser test, and
# a step that prints none (gofmt, the Apex checks) as one named check; a
# step that fails without a failed result counts as one failure. Each step
# ends with its duration ("== gofmt: 2 s"); the suite with the step times
# and one line, "== N passed, N failed, N skipped; T s", naming the step it
# stopped at when one failed. Its exit status is the failing step's.
#   bash .ci/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

work=$(mktemp -d)
tally="$work/tally" # the results so far (testsum)
step="setup"
times=()    # "name N s" of every step run
installs=() # background npm installs (below)
# The suite's own exit status is kept: cleaning up must never turn a pass
# into a failure (a redis-server still flushing its files into $work made the
# rm fail once), nor hide a failure.
cleanup() {
  local rc=$?
  [ -z "${prepare:-}" ] || kill -- "-$prepare" 2>/dev/null || true
  [ -z "${faultwaits:-}" ] || kill -- "-$faultwaits" 2>/dev/null || true
  for pid in "${installs[@]}"; do wait "$pid" 2>/dev/null || true; done # they write into $work
  bash proxy/internal/redistest/start-redis.sh --stop "$work" || true
  # before testsum is built (installing Redis, or its build, failed) nothing
  # was counted: the failure is still one
  local line="0 passed, $((rc != 0)) failed, 0 skipped (nothing counted: testsum was not built)"
  [ -x "$work/testsum" ] && line=$("$work/testsum" total "$tally" 2>/dev/null || echo "$line")
  ((${#times[@]})) && echo "== step times: $(printf '%s · ' "${times[@]}" | sed 's/ · $//')"
  if [ "$rc" -eq 0 ]; then
    echo "== $line; ${SECONDS} s"
  else
    echo "== $line; ${SECONDS} s; the suite stopped at: $step (exit $rc)"
  fi
  rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work" || true; }
  exit "$rc"
}
trap cleanup EXIT
step="install"
need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if ((${#need_apt[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "== installing ${need_apt[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

step="setup"
go build -o "$work/testsum" ./proxy/internal/testsum

# run_step NAME WHAT CMD [ARG…]: one step, counted by testsum, timed.
run_step() {
  local name=$1 t0=$SECONDS rc=0
  step="$name"
  echo "== $name: $2"
  shift 2
  "$work/testsum" run "$tally" "$name" "$@" || rc=$?
  times+=("$name $((SECONDS - t0)) s")
  echo "== $name: $((SECONDS - t0)) s"
  return "$rc"
}

# The two npm installs (network-bound) that the Apex checks and the browser
# test would each make in turn on a fresh machine run in the background
# while gofmt and go vet use the cores; those steps wait for them and find
# node_modules current (when one failed, its step installs again and shows
# why).
if command -v npm >/dev/null 2>&1; then
  (cd apex-stubs && { npm ls --depth=0 >/dev/null 2>&1 || npm ci --no-audit --no-fund --loglevel=error; }) \
    >"$work/npm-apex.log" 2>&1 &
  installs+=($!)
  (cd proxy/admin/console/e2e && { [ -f node_modules/playwright-core/package.json ] ||
    npm ci --no-audit --no-fund --silent; }) >"$work/npm-e2e.log" 2>&1 &
  installs+=($!)
fi

# The deploy step's cold compiles (helm from its Go module, the static
# binaries, deploy/k8s-check's Kubernetes and kustomize dependencies: about
# 4 minutes of both cores on a fresh machine) run in the background at the
# lowest CPU priority from the start (deploy/check.sh --prepare): they take
# only the CPU the other steps leave idle (the Apex checks, the fault suite's
# waits for killed processes and lapsing leases), and the deploy step, run
# last, waits for them and finds everything compiled.
# setsid: its own process group, which cleanup stops when a step fails first.
setsid nice -n 19 bash deploy/check.sh --prepare >"$work/deploy-prepare.log" 2>&1 &
prepare=$!

run_step gofmt "gofmt -l over every Go file" bash -c \
  'u=$(gofmt -l $(git ls-files "*.go" 2>/dev/null || find . -name "*.go")); [ -z "$u" ] || { echo "gofmt would change:"; echo "$u"; exit 1; }'
run_step vet "go vet (and the files behind the fault, sizing and hostile build tags)" bash -c \
  'go vet ./... && go vet -tags fault,sizing,hostile ./proxy/internal/fault/ ./deploy/sizing/ ./proxy/internal/hostile/'
# Every go test below runs with -vet=off: the step above ran go vet's every
# analyzer over the same packages (go test's own vet is a subset of them,
# about 30 s of the go test step on 2 cores).

# One callout-proxy binary for every suite that runs it (fault, hostile, the
# real client libraries, the browser test, the multi-process tests of
# cmd/callout-proxy: proctest.BuildBinary), instead of a link each.
run_step build "go build ./cmd/callout-proxy, shared by the suites below (CALLOUT_PROXY_BINARY)" \
  go build -o "$work/callout-proxy" ./cmd/callout-proxy
export CALLOUT_PROXY_BINARY="$work/callout-proxy"

# The fault suite's two cases that mostly wait on real time (its `waits`
# part: the proxy's token backoff, about 165 s using almost no CPU) run in
# the background from here, beside the Apex checks and go test; the fault
# step runs the rest, then prints and counts them. setsid: its own process
# group, which cleanup stops when a step fails first.
mkdir -p "$work/fault"
setsid bash -c 'CALLOUT_FAULT_WORK="$1/fault" bash .ci/fault.sh waits >"$1/fault-waits.out" 2>&1; echo $? >"$1/fault-waits.rc"' \
  _ "$work" &
faultwaits=$!

for pid in "${installs[@]}"; do wait "$pid" || true; done
run_step apex "Apex checks (parse, format, metadata)" bash apex-stubs/check.sh
run_step redis "starting throwaway Redis (single node + 3-master cluster)" bash -c \
  'bash proxy/internal/redistest/start-redis.sh "$1" >"$1/redis.env"' _ "$work"
eval "$(cat "$work/redis.env")"
export CALLOUT_TEST_REQUIRE_REAL=1

# -p 4 on 2 cores: packages that mostly wait (the multi-process tests, the
# command's end-to-end tests) overlap with those that compute.
run_step go-test "go test (unit and integration)" go test -race -vet=off -p 4 -count=1 -timeout 15m -json ./...
run_step sizing "sizing measurement (Redis round trips per request, bytes per record; behind the sizing build tag)" \
  go test -vet=off -count=1 -timeout 10m -tags sizing -json ./deploy/sizing/
run_step fault "fault suite (SIGKILLed replicas and Redis, Salesforce down, toxiproxy)" \
  env CALLOUT_FAULT_WORK="$work/fault" bash .ci/fault.sh rest
wait "$faultwaits" || true
faultwaits=""
run_step fault-waits "the fault suite's Salesforce token and login cases (run in the background since the build step)" \
  bash -c 'cat "$1/fault-waits.out"; exit "$(cat "$1/fault-waits.rc" 2>/dev/null || echo 1)"' _ "$work"
run_step hostile "hostile suite (idle connections, slow callers, huge headers and bodies, answers never read; real client libraries)" \
  bash .ci/hostile.sh
run_step console-e2e "ops console in headless Chromium (real binary, real Redis; installs chromium and playwright-core)" \
  bash proxy/admin/console/e2e/run.sh
wait "$prepare" || { echo "== deploy --prepare failed (the deploy step compiles again and shows why):"; tail -5 "$work/deploy-prepare.log"; }
run_step deploy "deploy checks (static builds, promtool, metrics named by alerts, kustomize, helm, compose)" bash deploy/check.sh
