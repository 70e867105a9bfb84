#!/usr/bin/env bash
# The benchmark harness (issue 10), one command: bash deploy/bench/run.sh
# Loopback only; about 4 minutes. Starts a durable redis-server, the fast
# upstream, the bare ReverseProxy baseline and the proxy, measures peak
# throughput and fixed-rate latency (half the bare proxy's peak) for reads
# and keyed writes against both baselines, then seeds 100,000 callouts and
# times their drain, with Redis commandstats and memory. Prints JSON lines
# and writes them to $OUT (default /tmp/callout-bench.jsonl).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"
OUT=${OUT:-/tmp/callout-bench.jsonl}; DUR=${DUR:-10s}; N=${N:-100000}
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/bench" . && (cd ../.. && go build -o "$work/callout-proxy" ./cmd/callout-proxy)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RP=$(port); UP=$(port); BP=$(port); PP=$(port); AP=$(port)
redis-server --port "$RP" --bind 127.0.0.1 --dir "$work" --appendonly yes --appendfsync everysec --save "" >"$work/redis.log" 2>&1 & pids+=($!); REDIS=$!
"$work/bench" upstream -listen "127.0.0.1:$UP" & pids+=($!); UPID=$!
"$work/bench" bare -listen "127.0.0.1:$BP" -to "http://127.0.0.1:$UP" & pids+=($!); BPID=$!
export CALLOUT_PROXY_JWT_SECRET=bench-secret-of-at-least-32-bytes-long-xx
cat >"$work/proxy.yaml" <<YAML
listen: 127.0.0.1:$PP
admin_listen: 127.0.0.1:$AP
redis: {url: "redis://127.0.0.1:$RP/0"}
auth: {issuers: [https://bench.my.salesforce.com], audience: callout-proxy, algorithms: [HS256], hs256_secret_env: CALLOUT_PROXY_JWT_SECRET}
policy: {max_backlog_items: 1000000, max_backlog_bytes: 1000000000}
endpoints:
  up: {url: "http://127.0.0.1:$UP", allowed_networks: [127.0.0.0/8]}
  drain: {url: "http://127.0.0.1:$UP", allowed_networks: [127.0.0.0/8], max_backlog_items: 1000000}
YAML
"$work/callout-proxy" --config "$work/proxy.yaml" 2>"$work/proxy.log" & pids+=($!); PROXY=$!
sleep 2
TOKEN=$("$work/callout-proxy" token --config "$work/proxy.yaml" --lifetime 1h)
: >"$OUT"
emit() { echo "$1" | tee -a "$OUT"; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }   # utime+stime in clock ticks
for method in GET POST; do
  declare -A peak=()
  for t in direct bare proxy; do
    case $t in direct) u="http://127.0.0.1:$UP/v1/charges";; bare) u="http://127.0.0.1:$BP/v1/charges";; proxy) u="http://127.0.0.1:$PP/callout/up/v1/charges";; esac
    c0=$(cpu "$PROXY"); r=$("$work/bench" load -url "$u" -method $method -duration "$DUR" -token "$TOKEN"); c1=$(cpu "$PROXY")
    peak[$t]=$(echo "$r" | python3 -c 'import json,sys;print(int(json.load(sys.stdin)["throughput_rps"]))')
    emit "{\"kind\":\"peak\",\"target\":\"$t\",\"proxy_cpu_ticks\":$((c1-c0)),\"result\":$r}"
  done
  rate=$(( ${peak[bare]} / 2 ))
  for t in direct bare proxy; do
    case $t in direct) u="http://127.0.0.1:$UP/v1/charges";; bare) u="http://127.0.0.1:$BP/v1/charges";; proxy) u="http://127.0.0.1:$PP/callout/up/v1/charges";; esac
    r=$("$work/bench" load -url "$u" -method $method -rate "$rate" -duration "$DUR" -token "$TOKEN")
    emit "{\"kind\":\"fixed\",\"target\":\"$t\",\"result\":$r}"
  done
done
emit "{\"kind\":\"cpu_sync\",\"clk_tck\":$(getconf CLK_TCK),\"redis\":$(cpu $REDIS),\"upstream\":$(cpu $UPID),\"bare\":$(cpu $BPID),\"proxy\":$(cpu $PROXY)}"
# Asynchronous drain: stop the proxy, seed, reset stats, start 2 replicas.
kill "$PROXY"; wait "$PROXY" 2>/dev/null || true
redis-cli -p "$RP" FLUSHALL >/dev/null
emit "{\"kind\":\"seed\",\"result\":$("$work/bench" seed -redis "redis://127.0.0.1:$RP/0" -n "$N")}"
redis-cli -p "$RP" CONFIG RESETSTAT >/dev/null
t0=$(awk '{print $1}' /proc/uptime)
reps=(); adm=()
for i in 1 2; do
  adm[$i]=$(port)
  sed "s/127.0.0.1:$PP/127.0.0.1:0/; s/127.0.0.1:$AP/127.0.0.1:${adm[$i]}/" "$work/proxy.yaml" >"$work/r$i.yaml"
  "$work/callout-proxy" --config "$work/r$i.yaml" 2>"$work/r$i.log" & pids+=($!); reps+=($!)
done
emit "{\"kind\":\"drain\",\"replicas\":2,\"result\":$("$work/bench" drain -redis "redis://127.0.0.1:$RP/0" -n "$N")}"
redis-cli -p "$RP" INFO commandstats | tr -d '\r' | grep '^cmdstat' | sed 's/^cmdstat_//' >"$work/cmdstats"
emit "{\"kind\":\"commandstats\",\"attempts\":$N,\"calls\":{$(awk -F'[:=,]' '{printf "%s\"%s\":%s", (NR>1?",":""), $1, $3}' "$work/cmdstats")}}"
u1=$(cpu $UPID); r1=$(cpu $REDIS)
emit "{\"kind\":\"cpu_total\",\"clk_tck\":$(getconf CLK_TCK),\"redis\":$r1,\"upstream\":$u1,\"replica1\":$(cpu ${reps[0]}),\"replica2\":$(cpu ${reps[1]})}"
# Schedule lag p99 (SPEC metric callout_schedule_lag_seconds, both replicas' buckets summed).
for i in 1 2; do curl -s "http://127.0.0.1:${adm[$i]}/metrics"; done | grep '^callout_schedule_lag_seconds_bucket' >"$work/lag" || true
emit "{\"kind\":\"schedule_lag\",\"p99_le_seconds\":$(python3 - "$work/lag" <<'PY'
import re,sys,collections
b=collections.Counter()
for l in open(sys.argv[1]):
    m=re.search(r'le="([^"]+)"\}\s+(\S+)',l)
    if m: b[float(m.group(1))]+=float(m.group(2))
if not b: print("null"); sys.exit()
tot=b[float("inf")]; k=next((k for k in sorted(b) if b[k]>=0.99*tot),None); print("null" if k is None or k==float("inf") else k)
PY
)}"
