#!/usr/bin/env bash
# start-redis.sh — throwaway Redis servers for the store's tests.
#
#   start-redis.sh DIR          start one single node and a 3-master Redis
#                               Cluster on free loopback ports, with data,
#                               logs and pid files under DIR; print the
#                               environment for redistest.Backends on stdout:
#                                 export CALLOUT_TEST_REDIS_URL=redis://127.0.0.1:P/0
#                                 export CALLOUT_TEST_REDIS_CLUSTER=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   start-redis.sh --stop DIR   stop the servers started under DIR (by pid file).
#
# Use it as:  eval "$(proxy/internal/redistest/start-redis.sh /tmp/callout-redis)"
# Nothing persists (no RDB, no AOF); the tests FLUSHALL these servers.
# Progress and errors go to stderr; only the export lines go to stdout.
set -euo pipefail

REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}

die() { echo "start-redis.sh: $*" >&2; exit 1; }

# port_free P: true when nothing listens on P nor on its cluster bus port
# P+10000 (without ss(8), assume free: start_port retries on failure).
port_free() {
	command -v ss >/dev/null || return 0
	[ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] &&
		[ -z "$(ss -Hltn "sport = :$(($1 + 10000))" 2>/dev/null)" ]
}

# pick_port: a free port in 20000–39999 whose bus port is free too.
pick_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 20000))
		if port_free "$p"; then echo "$p"; return 0; fi
	done
	die "no free port found"
}

wait_ping() {
	local i
	for i in $(seq 1 100); do
		if [ "$("$REDIS_CLI" -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
		sleep 0.05
	done
	return 1
}

# start_node PORT [extra redis-server args...]: start one daemonised server;
# false when it does not come up (port taken in a race, say).
start_node() {
	local port=$1; shift
	"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--daemonize yes --dir "$DIR" --pidfile "$DIR/redis-$port.pid" \
		--logfile "$DIR/redis-$port.log" "$@" >&2 || return 1
	wait_ping "$port"
}

# start_port [extra args...]: start a server on a free port, trying a few;
# prints the port.
start_port() {
	local p i
	for i in 1 2 3 4 5; do
		p=$(pick_port)
		case " ${used[*]:-} " in *" $p "*) continue ;; esac
		if start_node "$p" "$@"; then used+=("$p"); echo "$p"; return 0; fi
		echo "start-redis.sh: port $p failed, trying another (see $DIR/redis-$p.log)" >&2
	done
	die "could not start redis-server"
}

stop_all() {
	local pidfile pid
	[ -d "$DIR" ] || return 0
	for pidfile in "$DIR"/redis-*.pid; do
		[ -e "$pidfile" ] || continue
		pid=$(cat "$pidfile")
		if kill -0 "$pid" 2>/dev/null; then kill "$pid"; fi
		rm -f "$pidfile"
	done
	rm -f "$DIR"/nodes-*.conf
}

if [ "${1:-}" = "--stop" ]; then
	[ $# -eq 2 ] || die "usage: start-redis.sh --stop DIR"
	DIR=$2
	stop_all
	exit 0
fi
[ $# -eq 1 ] || die "usage: start-redis.sh DIR | start-redis.sh --stop DIR"
command -v "$REDIS_SERVER" >/dev/null || die "$REDIS_SERVER not found"
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
stop_all

used=()
single=$(start_port)
used+=("$single")
cluster=()
for n in 1 2 3; do
	p=$(start_port --cluster-enabled yes --cluster-config-file "$DIR/nodes-cluster-$n.conf" \
		--cluster-node-timeout 5000)
	used+=("$p")
	cluster+=("$p")
done

"$REDIS_CLI" --cluster create "127.0.0.1:${cluster[0]}" "127.0.0.1:${cluster[1]}" \
	"127.0.0.1:${cluster[2]}" --cluster-replicas 0 --cluster-yes >&2 ||
	die "redis-cli --cluster create failed"

for p in "${cluster[@]}"; do
	ok=
	for i in $(seq 1 200); do
		if "$REDIS_CLI" -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; then
			ok=1; break
		fi
		sleep 0.05
	done
	[ -n "$ok" ] || die "cluster node $p never reached cluster_state:ok"
done

echo "export CALLOUT_TEST_REDIS_URL=redis://127.0.0.1:$single/0"
echo "export CALLOUT_TEST_REDIS_CLUSTER=127.0.0.1:${cluster[0]},127.0.0.1:${cluster[1]},127.0.0.1:${cluster[2]}"
