#!/usr/bin/env bash
# The benchmark harness, one command: bash deploy/bench/run.sh
# Loopback only; about 7 minutes. Starts a durable redis-server, the fast
# upstream, the bare ReverseProxy baseline and the proxy, measures peak
# throughput and fixed-rate latency at two rates (half the bare proxy's
# peak, the issue's wording; and half the proxy's own peak, below its
# saturation) for reads and keyed writes against both baselines, then seeds
# 100,000 callouts and times their drain. Around each phase (reads, keyed
# writes, drain) it takes INFO commandstats/stats deltas, and a short
# MONITOR sample of each splits the commands the clients sent from those
# Lua scripts ran. Peaks are measured twice: vegeta's max-rate mode and wrk
# (wrk.lua; apt-get install -y wrk when missing), both with 64 connections.
# Last, a steady-state schedule-lag phase: Prefer: respond-async keyed POSTs
# at LAG_RATE/s (default 500) for LAG_DUR (20s) into 2 replicas, and the
# delta of both replicas' callout_schedule_lag_seconds histograms. Prints
# JSON lines and writes them to $OUT (default /tmp/callout-bench.jsonl).
# PHASES (default "sync wrk drain lag") selects phases: sync = vegeta peaks,
# fixed rates and MONITOR samples; wrk = wrk peaks; drain = the 100,000 drain
# and its MONITOR sample; lag = the steady-state schedule lag.
# CPU profiles: the proxy runs with admin.pprof on, and each
# phase records a CPU profile of every proxy under load through
# /debug/pprof/profile (write-scope token): reads and keyed writes at peak
# (vegeta, wrk), each replica during the first PROF_DRAIN seconds (default
# 10) of the drain and during the whole lag load. Profiles go to $PROF
# (default /tmp/callout-bench-prof): NAME.pprof, and NAME.top.txt with its
# top functions by own and by cumulative time (go tool pprof -top); a {"kind":"profile"} line names
# each. Read one with: go tool pprof -http=: $PROF/NAME.pprof
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"
OUT=${OUT:-/tmp/callout-bench.jsonl}; DUR=${DUR:-10s}; N=${N:-100000}
PHASES=" ${PHASES:-sync wrk drain lag} "; LAG_RATE=${LAG_RATE:-500}; LAG_DUR=${LAG_DUR:-20s}
PROF=${PROF:-/tmp/callout-bench-prof}; PROF_DRAIN=${PROF_DRAIN:-10}
# DURABILITY (default local): the proxies' redis.durability; with
# replicated a replica redis-server (AOF, everysec) follows the primary.
DURABILITY=${DURABILITY:-local}
on() { [[ $PHASES == *" $1 "* ]]; }
if on wrk && ! command -v wrk >/dev/null; then apt-get install -y wrk >/dev/null; fi
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/bench" . && (cd ../.. && go build -o "$work/callout-proxy" ./cmd/callout-proxy)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RP=$(port); UP=$(port); BP=$(port); PP=$(port); AP=$(port)
redis-server --port "$RP" --bind 127.0.0.1 --dir "$work" --appendonly yes --appendfsync everysec --save "" >"$work/redis.log" 2>&1 & pids+=($!); REDIS=$!
if [ "$DURABILITY" != local ]; then
  RR=$(port); mkdir -p "$work/replica"
  redis-server --port "$RR" --bind 127.0.0.1 --dir "$work/replica" --appendonly yes --appendfsync everysec --save "" \
    --replicaof 127.0.0.1 "$RP" >"$work/replica.log" 2>&1 & pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$RR" info replication 2>/dev/null | grep -q master_link_status:up && break; sleep 0.1; done
fi
"$work/bench" upstream -listen "127.0.0.1:$UP" & pids+=($!); UPID=$!
"$work/bench" bare -listen "127.0.0.1:$BP" -to "http://127.0.0.1:$UP" & pids+=($!); BPID=$!
export CALLOUT_PROXY_JWT_SECRET=bench-secret-of-at-least-32-bytes-long-xx
export BENCH_ADMIN_TOKEN=bench-admin-token-$RANDOM$RANDOM$RANDOM
cat >"$work/proxy.yaml" <<YAML
listen: 127.0.0.1:$PP
admin_listen: 127.0.0.1:$AP
redis: {url: "redis://127.0.0.1:$RP/0", durability: $DURABILITY}
auth: {issuers: [https://bench.my.salesforce.com], audience: callout-proxy, algorithms: [HS256], hs256_secret_env: CALLOUT_PROXY_JWT_SECRET}
admin: {pprof: true, tokens: [{name: bench, token_env: BENCH_ADMIN_TOKEN, scope: write}]}
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
emit "{\"kind\":\"run\",\"durability\":\"$DURABILITY\",\"commit\":\"$(git rev-parse --short HEAD 2>/dev/null)\",\"load_average\":\"$(cut -d" " -f1-3 /proc/loadavg)\"}"
mkdir -p "$PROF"
# prof_start NAME ADMIN_PORT SECONDS: a CPU profile of the proxy on that
# admin port, in the background; prof_wait collects every one started.
profs=()
prof_start() {
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$2/metrics" && break; sleep 0.1; done
  curl -sf -H "Authorization: Bearer $BENCH_ADMIN_TOKEN" -o "$PROF/$1.pprof" \
    "http://127.0.0.1:$2/debug/pprof/profile?seconds=$3" & profs+=("$!:$1:$3")
}
prof_wait() {
  local p pid rest name secs ok
  for p in "${profs[@]}"; do
    pid=${p%%:*}; rest=${p#*:}; name=${rest%%:*}; secs=${rest#*:}; ok=true
    wait "$pid" || ok=false
    if $ok && [ -s "$PROF/$name.pprof" ]; then
      { go tool pprof -top -nodecount=25 "$PROF/$name.pprof"; echo; echo "# by cumulative time"
        go tool pprof -top -cum -nodecount=40 "$PROF/$name.pprof"; } >"$PROF/$name.top.txt" 2>/dev/null || true
      emit "{\"kind\":\"profile\",\"name\":\"$name\",\"seconds\":$secs,\"file\":\"$PROF/$name.pprof\",\"bytes\":$(stat -c %s "$PROF/$name.pprof"),\"top\":\"$PROF/$name.top.txt\"}"
    else
      emit "{\"kind\":\"profile\",\"name\":\"$name\",\"error\":\"no profile\"}"
    fi
  done
  profs=()
}
secs() { local d=${1%s}; echo "${d%.*}"; }   # "10s" -> 10 (whole seconds)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }   # utime+stime in clock ticks

# snap FILE: INFO commandstats calls and usec (time Redis spent running each command,
# scripts' own commands included in their EVALSHA's) per command plus INFO stats counters, as JSON.
snap() { { redis-cli -p "$RP" INFO commandstats; redis-cli -p "$RP" INFO stats; } | tr -d '\r' | python3 -c '
import json,re,sys
calls,st,us={},{},{}
for l in sys.stdin:
    m=re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)",l)
    if m: calls[m.group(1)]=int(m.group(2)); us[m.group(1)]=int(m.group(3))
    m=re.match(r"(total_commands_processed|total_reads_processed|total_writes_processed):(\d+)",l)
    if m: st[m.group(1)]=int(m.group(2))
print(json.dumps({"calls":calls,"stats":st,"usec":us}))' >"$1"; }
# delta A B: B minus A, without the harness's own INFO/CONFIG calls.
delta() { python3 - "$1" "$2" <<'PY'
import json,sys
a,b=(json.load(open(f)) for f in sys.argv[1:3])
c={k:v-a["calls"].get(k,0) for k,v in b["calls"].items() if k not in("info","config") and v-a["calls"].get(k,0)}
u={k:v-a["usec"].get(k,0) for k,v in b["usec"].items() if k not in("info","config") and v-a["usec"].get(k,0)}
print(json.dumps({"calls":c,"stats":{k:v-a["stats"].get(k,0) for k,v in b["stats"].items()},"usec":u}))
PY
}
# mon_start FILE / mon_stop FILE: a redis-cli MONITOR capture, summarised as
# commands per source ("client": sent over a connection; "lua": run by a script).
mon_start() { redis-cli -p "$RP" MONITOR >"$1" & MON=$!; sleep 0.5; }
mon_stop() { sleep 0.5; kill "$MON"; wait "$MON" 2>/dev/null || true; python3 - "$1" <<'PY'
import collections,json,re,sys
c={"client":collections.Counter(),"lua":collections.Counter()}
for l in open(sys.argv[1],errors="replace"):
    m=re.match(r'\S+ \[\d+ ([^\]]+)\] "([^"]+)"',l)
    if m and m.group(2).lower() not in ("info","config","monitor"):
        c["lua" if m.group(1)=="lua" else "client"][m.group(2).lower()]+=1
print(json.dumps({k:dict(v) for k,v in c.items()}))
PY
}
url() { case $1 in direct) echo "http://127.0.0.1:$UP/v1/charges";; bare) echo "http://127.0.0.1:$BP/v1/charges";; proxy) echo "http://127.0.0.1:$PP/callout/up/v1/charges";; esac; }
# Background commands of the idle proxy (dispatcher rounds), per second.
if on sync; then
mon_start "$work/mon-idle"; sleep 3; emit "{\"kind\":\"monitor\",\"phase\":\"idle\",\"seconds\":4,\"commands\":$(mon_stop "$work/mon-idle")}"
for method in GET POST; do
  declare -A peak=()
  phase=$([ $method = GET ] && echo reads || echo keyed_writes)
  for t in direct bare proxy; do
    if [ $t = proxy ]; then prof_start "$phase-vegeta-peak" "$AP" "$(secs "$DUR")"; fi
    snap "$work/s0"; c0=$(cpu "$PROXY"); r=$("$work/bench" load -url "$(url $t)" -method $method -duration "$DUR" -token "$TOKEN"); c1=$(cpu "$PROXY"); snap "$work/s1"
    prof_wait
    peak[$t]=$(echo "$r" | python3 -c 'import json,sys;print(int(json.load(sys.stdin)["throughput_rps"]))')
    emit "{\"kind\":\"peak\",\"target\":\"$t\",\"proxy_cpu_ticks\":$((c1-c0)),\"result\":$r}"
    if [ $t = proxy ]; then
      n=$(echo "$r" | python3 -c 'import json,sys;print(json.load(sys.stdin)["requests"])')
      emit "{\"kind\":\"commandstats\",\"phase\":\"$phase\",\"requests\":$n,\"delta\":$(delta "$work/s0" "$work/s1")}"
    fi
  done
  # Fixed rate 1: half the bare proxy's peak (the issue's wording); fixed
  # rate 2: half the proxy's own peak, so the proxy is below saturation.
  for basis in half_bare_peak half_proxy_peak; do
    rate=$([ $basis = half_bare_peak ] && echo $(( ${peak[bare]} / 2 )) || echo $(( ${peak[proxy]} / 2 )))
    for t in direct bare proxy; do
      r=$("$work/bench" load -url "$(url $t)" -method $method -rate "$rate" -duration "$DUR" -token "$TOKEN")
      emit "{\"kind\":\"fixed\",\"basis\":\"$basis\",\"target\":\"$t\",\"result\":$r}"
    done
  done
  # Which commands the proxy sends vs its scripts run (MONITOR slows Redis:
  # a split only, at a low fixed rate, never timed).
  mon_start "$work/mon-$phase"; r=$("$work/bench" load -url "$(url proxy)" -method $method -rate 300 -duration 4s -token "$TOKEN")
  emit "{\"kind\":\"monitor\",\"phase\":\"$phase\",\"result\":$r,\"commands\":$(mon_stop "$work/mon-$phase")}"
done
fi
# Peaks with wrk: 2 threads, 64 connections (as vegeta's peak runs), DUR each.
if on wrk; then
  for method in GET POST; do
    for t in direct bare proxy; do
      if [ $t = proxy ]; then prof_start "wrk-$method-peak" "$AP" "$(secs "$DUR")"; fi
      c0=$(cpu "$PROXY")
      r=$(WRK_METHOD=$method WRK_TOKEN="$TOKEN" WRK_RUN=$(date +%s%N) \
        wrk -t2 -c64 -d"$DUR" -s wrk.lua "$(url $t)" | sed -n 's/^WRKJSON //p')
      c1=$(cpu "$PROXY"); prof_wait
      emit "{\"kind\":\"wrk_peak\",\"target\":\"$t\",\"method\":\"$method\",\"connections\":64,\"threads\":2,\"proxy_cpu_ticks\":$(( c1 - c0 )),\"result\":$r}"
    done
  done
fi
emit "{\"kind\":\"cpu_sync\",\"clk_tck\":$(getconf CLK_TCK),\"redis\":$(cpu $REDIS),\"upstream\":$(cpu $UPID),\"bare\":$(cpu $BPID),\"proxy\":$(cpu $PROXY)}"
kill "$PROXY"; wait "$PROXY" 2>/dev/null || true
reps=(); adm=(); lst=()
# start_replicas: 2 proxies on the same Redis, listening on lst[i], admin adm[i].
start_replicas() {
  reps=()
  for i in 1 2; do
    adm[$i]=$(port); lst[$i]=$(port)
    sed "s/127.0.0.1:$PP/127.0.0.1:${lst[$i]}/; s/127.0.0.1:$AP/127.0.0.1:${adm[$i]}/" "$work/proxy.yaml" >"$work/r$i.yaml"
    "$work/callout-proxy" --config "$work/r$i.yaml" 2>>"$work/r$i.log" & pids+=($!); reps+=($!)
  done
}
stop_replicas() { for p in "${reps[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done; reps=(); }
if on drain; then
# Asynchronous drain: with the proxy stopped, seed, start 2 replicas.
redis-cli -p "$RP" FLUSHALL >/dev/null
emit "{\"kind\":\"seed\",\"result\":$("$work/bench" seed -redis "redis://127.0.0.1:$RP/0" -n "$N")}"
emit "{\"kind\":\"cpu_drain_start\",\"clk_tck\":$(getconf CLK_TCK),\"redis\":$(cpu $REDIS),\"upstream\":$(cpu $UPID)}"
snap "$work/d0"
start_replicas
# The drain's clock starts with the replicas, as before profiling; the
# profiles start once their admin listeners answer.
"$work/bench" drain -redis "redis://127.0.0.1:$RP/0" -n "$N" >"$work/drain.out" & DRAINER=$!
for i in 1 2; do prof_start "drain-replica$i" "${adm[$i]}" "$PROF_DRAIN"; done
wait "$DRAINER"; d=$(cat "$work/drain.out")
snap "$work/d1"
prof_wait
emit "{\"kind\":\"drain\",\"replicas\":2,\"result\":$d}"
emit "{\"kind\":\"commandstats\",\"phase\":\"drain\",\"attempts\":$N,\"delta\":$(delta "$work/d0" "$work/d1")}"
u1=$(cpu $UPID); r1=$(cpu $REDIS)
emit "{\"kind\":\"cpu_total\",\"clk_tck\":$(getconf CLK_TCK),\"redis\":$r1,\"upstream\":$u1,\"replica1\":$(cpu ${reps[0]}),\"replica2\":$(cpu ${reps[1]})}"
# Schedule lag p99 (contract metric callout_schedule_lag_seconds, both replicas' buckets summed).
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

# MONITOR split of the drain: stop the replicas, seed a small backlog, drain it under MONITOR.
stop_replicas
M=${M:-5000}
redis-cli -p "$RP" FLUSHALL >/dev/null
"$work/bench" seed -redis "redis://127.0.0.1:$RP/0" -n "$M" >/dev/null
mon_start "$work/mon-drain"; start_replicas
d=$("$work/bench" drain -redis "redis://127.0.0.1:$RP/0" -n "$M")
emit "{\"kind\":\"monitor\",\"phase\":\"drain\",\"attempts\":$M,\"drain\":$d,\"commands\":$(mon_stop "$work/mon-drain")}"
stop_replicas
fi
# Steady-state schedule lag: Prefer: respond-async keyed POSTs at LAG_RATE/s
# for LAG_DUR, split over both replicas' listeners (each dispatcher claims
# from the shared Redis), the fast upstream behind. Waits until the
# endpoint's backlog is empty, then takes the delta of both replicas'
# callout_schedule_lag_seconds histograms (summed) over the phase; p50/p99
# are given as the bucket they fall in (gt < value <= le).
if on lag; then
  redis-cli -p "$RP" FLUSHALL >/dev/null
  start_replicas; sleep 2
  lagsnap() { for i in 1 2; do curl -s "http://127.0.0.1:${adm[$i]}/metrics"; done | grep '^callout_schedule_lag_seconds' >"$1" || true; }
  lagsnap "$work/lag0"; c0="$(cpu $REDIS) $(cpu ${reps[0]}) $(cpu ${reps[1]}) $(cpu $UPID)"
  half=$((LAG_RATE / 2)); lp=()
  for i in 1 2; do prof_start "lag-replica$i" "${adm[$i]}" "$(secs "$LAG_DUR")"; done
  for i in 1 2; do
    "$work/bench" load -url "http://127.0.0.1:${lst[$i]}/callout/up/v1/charges" -method POST \
      -rate $([ $i = 1 ] && echo $half || echo $((LAG_RATE - half))) -duration "$LAG_DUR" -token "$TOKEN" \
      -header "Prefer: respond-async" >"$work/lagload$i" & lp+=($!)
  done
  wait "${lp[@]}"
  prof_wait
  d=$("$work/bench" drain -redis "redis://127.0.0.1:$RP/0" -endpoint up -n 0)
  lagsnap "$work/lag1"; c1="$(cpu $REDIS) $(cpu ${reps[0]}) $(cpu ${reps[1]}) $(cpu $UPID)"
  lag=$(python3 - "$work/lag0" "$work/lag1" <<'PY'
import collections,json,re,sys
def read(f):
    b,sc=collections.Counter(),{}
    for l in open(f):
        m=re.match(r'callout_schedule_lag_seconds_bucket\{le="([^"]+)"\}\s+(\S+)',l)
        if m: b[float(m.group(1))]+=float(m.group(2)); continue
        m=re.match(r'callout_schedule_lag_seconds_(sum|count)\s+(\S+)',l)
        if m: sc[m.group(1)]=sc.get(m.group(1),0)+float(m.group(2))
    return b,sc
(b0,s0),(b1,s1)=read(sys.argv[1]),read(sys.argv[2])
d={k:b1[k]-b0.get(k,0) for k in sorted(b1)}
n=s1.get("count",0)-s0.get("count",0); tot=s1.get("sum",0)-s0.get("sum",0)
def q(p):
    prev=0.0
    for k in sorted(d):
        if d[k]>=p*n: return {"gt":prev,"le":None if k==float("inf") else k}
        prev=k
print(json.dumps({"observations":int(n),"mean_s":tot/n if n else None,"p50_bucket":q(.5) if n else None,
  "p99_bucket":q(.99) if n else None,"max_bucket":q(1.0) if n else None,
  "cumulative":{("+Inf" if k==float("inf") else repr(k)):int(v) for k,v in d.items()}}))
PY
)
  emit "{\"kind\":\"schedule_lag_steady\",\"rate\":$LAG_RATE,\"duration\":\"$LAG_DUR\",\"replicas\":2,\"loads\":[$(cat "$work/lagload1"),$(cat "$work/lagload2")],\"backlog_wait_after_load\":$d,\"cpu_ticks\":{\"clk_tck\":$(getconf CLK_TCK),\"before\":\"$c0\",\"after\":\"$c1\",\"order\":\"redis replica1 replica2 upstream\"},\"lag\":$lag}"
  stop_replicas
fi
