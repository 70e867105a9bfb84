#!/bin/sh
# init.sh — writes this pod's redis.conf into $OUT_DIR (default
# /etc/redis-run) and its sentinel.conf into $STATE_DIR (default /data, the
# pod's volume: Sentinel rewrites the file as the primary moves, so it
# outlives the pod) from the templates in $TEMPLATE_DIR (default
# /etc/redis-templates). Runs as the init container of every pod of the
# StatefulSet callout-redis, before Redis and Sentinel start.
#
# The primary is the one the running Sentinels name (after a failover that
# is no longer pod 0, and a restarted pod 0 must come back as a replica);
# when none answers (every pod restarting at once), the one this pod's
# Sentinel last knew (its sentinel.conf from before); on the set's first
# start, pod 0.
# Environment: HOSTNAME (the pod's, callout-redis-N), POD_NAMESPACE,
# REDIS_PASSWORD; REDIS_SERVICE (default callout-redis), REDIS_PODS
# (default 3).
set -eu
: "${HOSTNAME:?}" "${POD_NAMESPACE:?}" "${REDIS_PASSWORD:?}"
svc=${REDIS_SERVICE:-callout-redis}
pods=${REDIS_PODS:-3}
templates=${TEMPLATE_DIR:-/etc/redis-templates}
out=${OUT_DIR:-/etc/redis-run}
state=${STATE_DIR:-/data}
self="$HOSTNAME.$svc.$POD_NAMESPACE.svc"

primary=""
i=0
while [ "$i" -lt "$pods" ]; do
	host="$svc-$i.$svc.$POD_NAMESPACE.svc"
	if [ "$host" != "$self" ]; then
		primary=$(REDISCLI_AUTH="$REDIS_PASSWORD" timeout 3 redis-cli -h "$host" -p 26379 \
			sentinel get-master-addr-by-name callouts 2>/dev/null | head -n 1) || primary=""
		[ -n "$primary" ] && break
	fi
	i=$((i + 1))
done
if [ -z "$primary" ] && [ -f "$state/sentinel.conf" ]; then
	primary=$(awk '$1 == "sentinel" && $2 == "monitor" && $3 == "callouts" { print $4; exit }' "$state/sentinel.conf")
fi
[ -n "$primary" ] || primary="$svc-0.$svc.$POD_NAMESPACE.svc"
echo "init.sh: $self starts with primary $primary"

mkdir -p "$out" "$state"
{
	cat "$templates/redis.conf"
	echo "requirepass \"$REDIS_PASSWORD\""
	echo "masterauth \"$REDIS_PASSWORD\""
	echo "replica-announce-ip $self"
	[ "$primary" = "$self" ] || echo "replicaof $primary 6379"
} >"$out/redis.conf"
{
	sed -e "s/@MASTER@/$primary/" -e "s/@SELF@/$self/" -e "s#@DIR@#$state#" "$templates/sentinel.conf"
	echo "sentinel auth-pass callouts \"$REDIS_PASSWORD\""
	echo "requirepass \"$REDIS_PASSWORD\""
} >"$state/sentinel.conf.new"
mv "$state/sentinel.conf.new" "$state/sentinel.conf"
chmod 0600 "$out/redis.conf" "$state/sentinel.conf"
