#!/usr/bin/env bash
# End-to-end tests of the ops console in headless Chromium, against the real
# proxy binary and a real Redis. It installs what is missing
# (Debian's chromium, playwright-core from package-lock.json), builds the
# binary, starts a throwaway redis-server, a scriptable upstream and the
# proxy on free loopback ports, runs e2e.mjs, and cleans up whatever
# happens. Bounded in time: every step has a timeout.
#
#   bash proxy/admin/console/e2e/run.sh            # screenshots in e2e/artifacts/
#   CONSOLE_E2E_DOCS=1 bash proxy/admin/console/e2e/run.sh   # also refresh docs/img/
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
artifacts="$here/artifacts"
work="$(mktemp -d /tmp/console-e2e.XXXXXX)"
pids=()

cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ] && [ -f "$work/proxy.log" ]; then
    echo "--- proxy log (last 40 lines) ---" >&2
    tail -n 40 "$work/proxy.log" >&2 || true
  fi
  rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work" 2>/dev/null || true; }
  exit "$rc"
}
trap cleanup EXIT

# 1. What the test needs: chromium from Debian, playwright-core pinned by
# package-lock.json, redis-server, node.
# Only what is missing: a machine whose node came from elsewhere (NodeSource's
# nodejs bundles npm) cannot take Debian's npm beside it (they conflict).
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v redis-server >/dev/null || need+=(redis-server)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq
  timeout 600 apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  (cd "$here" && timeout 300 npm ci --no-audit --no-fund --silent)
fi

# 2. The binary: CALLOUT_PROXY_BINARY's when set (.ci/test.sh builds one for
# every suite), else built here.
bin=${CALLOUT_PROXY_BINARY:-$work/callout-proxy}
[ -n "${CALLOUT_PROXY_BINARY:-}" ] || (cd "$root" && timeout 300 go build -o "$bin" ./cmd/callout-proxy)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
redis_port="$(free_port)"
upstream_port="$(free_port)"
listen_port="$(free_port)"
admin_port="$(free_port)"

# 3. A throwaway Redis, nothing saved.
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
  --dir "$work" --logfile "$work/redis.log" &
pids+=($!)

# 4. The upstream: /pay/* answers 503 (the breaker test), /crm/* 422 until
# told otherwise (dead letters, then successful replays).
node "$here/upstream.mjs" "$upstream_port" >"$work/upstream.log" 2>&1 &
pids+=($!)

# 5. The proxy.
export CALLOUT_PROXY_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export CONSOLE_E2E_WRITE_TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export CONSOLE_E2E_READ_TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat >"$work/config.yaml" <<EOF
listen: 127.0.0.1:$listen_port
admin_listen: 127.0.0.1:$admin_port
redis:
  url: redis://127.0.0.1:$redis_port/0
auth:
  issuers: [https://e2e.my.salesforce.com]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: CALLOUT_PROXY_JWT_SECRET
admin:
  tokens:
    - {name: ops, token_env: CONSOLE_E2E_WRITE_TOKEN, scope: write}
    - {name: viewer, token_env: CONSOLE_E2E_READ_TOKEN, scope: read}
policy:
  breaker_failures: 3
  breaker_probe_interval: 10m
endpoints:
  payment-api:
    url: http://127.0.0.1:$upstream_port/pay
    allowed_networks: [127.0.0.0/8]
  crm-api:
    url: http://127.0.0.1:$upstream_port/crm
    allowed_networks: [127.0.0.0/8]
EOF
"$bin" --config "$work/config.yaml" >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  if curl -fs "http://127.0.0.1:$listen_port/healthz" >/dev/null 2>&1 &&
     curl -fs "http://127.0.0.1:$upstream_port/__health" >/dev/null 2>&1; then
    break
  fi
  sleep 0.1
done
curl -fs "http://127.0.0.1:$listen_port/healthz" >/dev/null

rm -rf "$artifacts"
mkdir -p "$artifacts"
CALLER_TOKEN="$("$bin" token --config "$work/config.yaml" --lifetime 30m)" \
PROXY_URL="http://127.0.0.1:$listen_port" \
ADMIN_URL="http://127.0.0.1:$admin_port" \
UPSTREAM_URL="http://127.0.0.1:$upstream_port" \
ARTIFACTS="$artifacts" \
USER_DATA_DIR="$work/chromium-profile" \
  timeout 300 node "$here/e2e.mjs"

# The API audit-logged the console's writes with the token's name, the
# refused one too.
audit_line() {
  if grep '"msg":"audit"' "$work/proxy.log" | grep "\"token\":\"$1\"" | grep "\"action\":\"$2\"" |
     grep -q "\"result\":\"$3\""; then
    echo "ok - audit line: token $1, action $2, result $3"
  else
    echo "not ok - audit line: token $1, action $2, result $3"
    return 1
  fi
}
audit_line ops breaker_reset ok
# The console's reset closed an open breaker (the API reports "changed").
if grep '"msg":"audit"' "$work/proxy.log" | grep '"token":"ops"' | grep '"action":"breaker_reset"' |
   grep '"result":"ok"' | grep -q '"changed":true'; then
  echo "ok - audit line: the reset changed the breaker"
else
  echo "not ok - audit line: the reset changed the breaker"
  exit 1
fi
audit_line ops replay_job.create ok
audit_line ops replay replayed
audit_line ops discard ok
audit_line viewer breaker_reset forbidden
audit_line viewer replay forbidden
audit_line viewer console.login ok

if [ "${CONSOLE_E2E_DOCS:-}" = 1 ]; then
  mkdir -p "$root/docs/img"
  cp "$artifacts/endpoints.png" "$root/docs/img/console-endpoints.png"
  cp "$artifacts/dead-letter.png" "$root/docs/img/console-dead-letter.png"
fi
