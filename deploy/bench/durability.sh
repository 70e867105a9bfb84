#!/usr/bin/env bash
# Keyed-write cost of redis.durability, one command: bash deploy/bench/durability.sh
# Loopback only; about 2 minutes. Starts a primary redis-server (AOF,
# appendfsync everysec, as run.sh) with one replica, the fast upstream, the
# bare ReverseProxy baseline and two proxies on the same primary: one with
# durability local, one with durability replicated (WAIT 1, grouped). For
# each target a peak run of keyed POSTs (vegeta max-rate, 64 connections,
# DUR) and a fixed-rate run at RATE/s (default 400), plus the WAITs the
# primary ran per keyed write of the replicated proxy (INFO commandstats).
# Prints JSON lines and writes them to $OUT (default /tmp/callout-durability.jsonl).
# fsync (WAITAOF) needs Redis 7.2+: measured when redis-server is 7.2 or later.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"
OUT=${OUT:-/tmp/callout-durability.jsonl}; DUR=${DUR:-10s}; RATE=${RATE:-400}
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/bench" . && (cd ../.. && go build -o "$work/callout-proxy" ./cmd/callout-proxy)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RP=$(port); RR=$(port); UP=$(port); BP=$(port)
mkdir -p "$work/primary" "$work/replica"
redis-server --port "$RP" --bind 127.0.0.1 --dir "$work/primary" --appendonly yes --appendfsync everysec --save "" \
  >"$work/primary.log" 2>&1 & pids+=($!)
redis-server --port "$RR" --bind 127.0.0.1 --dir "$work/replica" --appendonly yes --appendfsync everysec --save "" \
  --replicaof 127.0.0.1 "$RP" >"$work/replica.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do redis-cli -p "$RR" info replication 2>/dev/null | grep -q master_link_status:up && break; sleep 0.1; done
"$work/bench" upstream -listen "127.0.0.1:$UP" & pids+=($!)
"$work/bench" bare -listen "127.0.0.1:$BP" -to "http://127.0.0.1:$UP" & pids+=($!)
export CALLOUT_PROXY_JWT_SECRET=bench-secret-of-at-least-32-bytes-long-xx
version=$(redis-cli -p "$RP" info server | sed -n 's/^redis_version:\([0-9.]*\).*/\1/p')
levels="local replicated"
if [ "$(printf '%s\n7.2.0\n' "$version" | sort -V | head -1)" = 7.2.0 ]; then levels="$levels fsync"; fi
declare -A pp=()
for level in $levels; do
  pp[$level]=$(port)
  cat >"$work/$level.yaml" <<YAML
listen: 127.0.0.1:${pp[$level]}
admin_listen: 127.0.0.1:$(port)
redis: {url: "redis://127.0.0.1:$RP/0", durability: $level}
auth: {issuers: [https://bench.my.salesforce.com], audience: callout-proxy, algorithms: [HS256], hs256_secret_env: CALLOUT_PROXY_JWT_SECRET}
policy: {max_backlog_items: 1000000, max_backlog_bytes: 1000000000}
endpoints:
  up: {url: "http://127.0.0.1:$UP", allowed_networks: [127.0.0.0/8]}
YAML
  "$work/callout-proxy" --config "$work/$level.yaml" 2>"$work/$level.log" & pids+=($!)
done
sleep 2
TOKEN=$("$work/callout-proxy" token --config "$work/local.yaml" --lifetime 1h)
: >"$OUT"
emit() { echo "$1" | tee -a "$OUT"; }
waits() { redis-cli -p "$RP" info commandstats | sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p' | grep . || echo 0; }
emit "{\"kind\":\"machine\",\"nproc\":$(nproc),\"redis\":\"$version\",\"load1\":\"$(cut -d' ' -f1 /proc/loadavg)\"}"
for mode in peak rate; do
  for t in bare $levels; do
    if [ "$t" = bare ]; then u="http://127.0.0.1:$BP/v1/charges"; else u="http://127.0.0.1:${pp[$t]}/callout/up/v1/charges"; fi
    args=(-url "$u" -method POST -duration "$DUR" -token "$TOKEN")
    [ "$mode" = rate ] && args+=(-rate "$RATE")
    w0=$(waits); r=$("$work/bench" load "${args[@]}"); w1=$(waits)
    emit "{\"kind\":\"durability\",\"mode\":\"$mode\",\"target\":\"$t\",\"waits\":$((w1 - w0)),\"load\":$r}"
  done
done
