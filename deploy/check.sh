#!/usr/bin/env bash
# deploy/check.sh — offline checks of everything under deploy/, run by the
# test command (.ci/test.sh) from the repository root:
#
#   bash deploy/check.sh
#
#  1. Dockerfile: multi-stage, non-root USER, distroless runtime stage,
#     every base image (and the syntax frontend) by its full name, its
#     build step is deploy/build.sh, its HEALTHCHECK the binary's own
#     (exec form: no shell in distroless); Dockerfile.dockerignore keeps the
#     compose .env, keys and other secrets out of the build context.
#  2. deploy/build.sh builds the binaries the image ships; they must be
#     static (no ELF interpreter, CGO_ENABLED=0) and stamped with the
#     commit (`callout-proxy version`, `calloutctl version`).
#  3. promtool check rules and promtool test rules on deploy/prometheus;
#     every alert's runbook_url is RUNBOOK_BASE_URL (prometheus/runbook.env,
#     absolute) + "#" + its name in lower case, a heading of deploy/README.md.
#  4. Every metric named by the rules, their tests and the Grafana dashboard
#     is exported by the proxy: declared in proxy/ or salesforce/ source
#     (Name: "callout_..."), or seen on /metrics of the real binary after a
#     few callouts (histograms may be named with _bucket, _sum, _count).
#  5. The dashboard is valid JSON with panels and queries.
#  6. The Helm chart (deploy/helm/callout-proxy): helm lint --strict and
#     helm template.
#  7. deploy/k8s-check (its own Go module): kustomize renders the base, the
#     example overlay and the Redis StatefulSet, helm the chart; every
#     object decodes strictly into k8s.io/api types and keeps the runbook's
#     promises; the chart's objects are the base's; the Redis init script
#     and configuration run on a real redis-server; the compose file's
#     structure.
#
# Installs promtool (Debian package prometheus) and jq with apt when missing,
# and builds helm (HELM_VERSION) with go install once. `bash deploy/check.sh
# --prepare` only compiles (see below).
# Idempotent; stops what it starts and removes its temporary files.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

work=$(mktemp -d)
proxy_pid=""
cleanup() {
	if [ -n "$proxy_pid" ] && kill -0 "$proxy_pid" 2>/dev/null; then
		kill "$proxy_pid" 2>/dev/null || true
		wait "$proxy_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

. .ci/lib.sh
step() { echo "== deploy: $*"; }
fail() { echo "deploy/check.sh: $*" >&2; exit 1; }

install_missing() {
	local need=() sudo=""
	command -v promtool >/dev/null 2>&1 || need+=(prometheus)
	command -v jq >/dev/null 2>&1 || need+=(jq)
	command -v curl >/dev/null 2>&1 || need+=(curl)
	((${#need[@]})) || return 0
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	step "installing ${need[*]}"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

check_dockerfile() {
	step "Dockerfile"
	local df=deploy/Dockerfile froms last_from user
	froms=$(grep -cE '^FROM ' "$df")
	[ "$froms" -ge 2 ] || fail "$df: $froms FROM lines; want a multi-stage build"
	last_from=$(grep -E '^FROM ' "$df" | tail -1)
	case "$last_from" in *distroless/static*) ;; *) fail "$df: runtime stage is '$last_from', want distroless/static" ;; esac
	# Podman and Buildah refuse a short name (golang:1.26) without a
	# registries.conf alias: every base image names its registry.
	local image
	while read -r image; do
		case "${image%%/*}" in *.* | *:* | localhost) ;; *) fail "$df: FROM $image is a short name; write docker.io/library/... (podman and buildah refuse it)" ;; esac
		[ "${image#*/}" != "$image" ] || fail "$df: FROM $image is a short name; write docker.io/library/..."
	done < <(awk '/^FROM /{print $2}' "$df"; sed -n 's/^# syntax=//p' "$df")
	user=$(awk '/^FROM /{u=""} /^USER /{u=$2} END{print u}' "$df")
	case "$user" in "" | root | 0 | 0:* | root:*) fail "$df: runtime stage USER is '${user:-unset}', want non-root" ;; esac
	grep -qE '^RUN (CALLOUT_[A-Z_]+="\$[A-Z_]+" )*bash deploy/build.sh ' "$df" || fail "$df: the build stage must run deploy/build.sh"
	grep -qE '^  CMD \["/usr/local/bin/callout-proxy", "healthcheck"' "$df" && grep -qE '^HEALTHCHECK ' "$df" ||
		fail "$df: no HEALTHCHECK running callout-proxy healthcheck in exec form"
	local ign pat
	ign=deploy/Dockerfile.dockerignore
	for pat in deploy/compose/.env '**/.env' '**/*.key' '**/*.pem' '**/secrets/' .dev/ /bin/; do
		grep -qxF "$pat" "$ign" || fail "$ign does not exclude $pat"
	done
	grep -q "CGO_ENABLED=0 go build -trimpath" deploy/build.sh || fail "deploy/build.sh: not a CGO_ENABLED=0 -trimpath build"
}

check_binaries() {
	step "static binaries (deploy/build.sh)"
	bash deploy/build.sh "$work/bin"
	local b linkage settings
	for b in "$work"/bin/*; do
		# ldd exits 1 on a static binary: read its words, not its status.
		linkage=$(ldd "$b" 2>&1 || true)
		grep -qE 'not a dynamic executable|statically linked' <<<"$linkage" ||
			fail "$b is dynamically linked: $linkage"
		settings=$(go version -m "$b")
		grep -qE '^\s+build\s+CGO_ENABLED=0$' <<<"$settings" || fail "$b was not built with CGO_ENABLED=0"
		echo "static: $(basename "$b")"
	done
	if git rev-parse --git-dir >/dev/null 2>&1; then
		local head
		head=$(git rev-parse HEAD | cut -c1-12)
		"$work/bin/callout-proxy" version | grep -qF "commit $head" ||
			fail "callout-proxy version does not name commit $head: $("$work/bin/callout-proxy" version)"
		"$work/bin/calloutctl" version | grep -qF "commit $head" ||
			fail "calloutctl version does not name commit $head: $("$work/bin/calloutctl" version)"
		echo "stamped: $("$work/bin/callout-proxy" version)"
	fi
}

check_rules() {
	step "promtool check rules / test rules"
	promtool check rules deploy/prometheus/alerts.yaml
	(cd deploy/prometheus && promtool test rules alerts_test.yaml)
}

check_runbook_urls() {
	step "runbook links: absolute, from runbook.env, to a heading of deploy/README.md"
	local RUNBOOK_BASE_URL="" alerts=0 name url want bad=""
	# shellcheck source=/dev/null
	. deploy/prometheus/runbook.env
	case "$RUNBOOK_BASE_URL" in https://* | http://*) ;; *) fail "runbook.env: RUNBOOK_BASE_URL '$RUNBOOK_BASE_URL' is not absolute" ;; esac
	while read -r name url; do
		alerts=$((alerts + 1))
		want="$RUNBOOK_BASE_URL#$(tr '[:upper:]' '[:lower:]' <<<"$name")"
		[ "$url" = "$want" ] || bad+=" $name($url, want $want)"
		grep -qxF "### $name" deploy/README.md || bad+=" $name(no '### $name' heading in deploy/README.md)"
	done < <(awk '/^ *- alert: /{a=$3} /^ *runbook_url: /{gsub(/"/, "", $2); print a, $2; a=""}' deploy/prometheus/alerts.yaml)
	[ "$alerts" -eq "$(grep -cE '^ *- alert: ' deploy/prometheus/alerts.yaml)" ] || fail "an alert without a runbook_url annotation"
	grep -oE 'runbook_url: "[^"]*"' deploy/prometheus/alerts_test.yaml | grep -vF "runbook_url: \"$RUNBOOK_BASE_URL#" &&
		fail "alerts_test.yaml: a runbook_url not under RUNBOOK_BASE_URL (run deploy/prometheus/set-runbook-url.sh)"
	[ -z "$bad" ] || fail "runbook links:$bad (run deploy/prometheus/set-runbook-url.sh)"
	echo "$alerts alerts link $RUNBOOK_BASE_URL#..."
}

# live_metrics runs the built proxy on deploy/examples/dev.yaml (ports 0,
# upstream on a closed port), sends a read, a keyed write and an
# unauthenticated request, and writes the metric names of /metrics to $1.
live_metrics() {
	local out=$1 cfg=$work/dev.yaml log=$work/proxy.log line listen admin token i
	grep -q '^listen: 127.0.0.1:8080' deploy/examples/dev.yaml &&
		grep -q '^admin_listen: 127.0.0.1:8081' deploy/examples/dev.yaml &&
		grep -q 'url: http://127.0.0.1:9000' deploy/examples/dev.yaml ||
		fail "deploy/examples/dev.yaml changed shape; update live_metrics in deploy/check.sh"
	sed -e 's/^listen: 127.0.0.1:8080/listen: 127.0.0.1:0/' \
		-e 's/^admin_listen: 127.0.0.1:8081/admin_listen: 127.0.0.1:0/' \
		-e 's#url: http://127.0.0.1:9000#url: http://127.0.0.1:1#' deploy/examples/dev.yaml >"$cfg"
	export CALLOUT_PROXY_JWT_SECRET="deploy-check-jwt-secret-0123456789abcdef"
	export CALLOUT_PROXY_ADMIN_TOKEN="deploy-check-admin-token"
	"$work/bin/callout-proxy" --config "$cfg" 2>"$log" &
	proxy_pid=$!
	for i in $(seq 1 100); do
		line=$(grep -m1 '"msg":"listening"' "$log" || true)
		[ -n "$line" ] && break
		kill -0 "$proxy_pid" 2>/dev/null || fail "the proxy exited: $(cat "$log")"
		sleep 0.1
	done
	[ -n "$line" ] || fail "the proxy did not log \"listening\" within 10 s"
	listen=$(jq -r .listen <<<"$line")
	admin=$(jq -r .admin_listen <<<"$line")
	token=$("$work/bin/callout-proxy" token --config "$cfg")
	curl -sS -o /dev/null -H "Authorization: Bearer $token" "http://$listen/callout/httpbin-local/status.json"
	curl -sS -o /dev/null -X POST -H "Authorization: Bearer $token" -H 'Idempotency-Key: "deploy-check-1"' \
		--data '{}' "http://$listen/callout/httpbin-local/orders"
	curl -sS -o /dev/null "http://$listen/callout/httpbin-local/status.json"
	curl -sS "http://$admin/metrics" >"$work/metrics.txt"
	kill "$proxy_pid"
	wait "$proxy_pid" 2>/dev/null || true
	proxy_pid=""
	grep -q '^callout_attempts_total{' "$work/metrics.txt" || fail "no callout_attempts_total series after a callout"
	grep -oE '^callout_[a-z0-9_]+' "$work/metrics.txt" | sort -u >"$out"
}

check_metric_names() {
	step "metrics named by rules and dashboard are exported"
	local exported=$work/exported used=$work/used missing="" name base
	grep -rhoE --include='*.go' --exclude='*_test.go' '(Name: *|NewDesc\()"callout_[a-z0-9_]+"' proxy salesforce |
		grep -oE 'callout_[a-z0-9_]+' | sort -u >"$work/declared"
	live_metrics "$work/live"
	sort -u "$work/declared" "$work/live" >"$exported"
	echo "declared $(wc -l <"$work/declared"), live $(wc -l <"$work/live"), exported $(wc -l <"$exported")"
	grep -ohE '\bcallout_[a-z0-9_]+' deploy/prometheus/alerts.yaml deploy/prometheus/alerts_test.yaml \
		deploy/grafana/callout-proxy.json | sort -u >"$used"
	while read -r name; do
		base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
		grep -qxF "$name" "$exported" || grep -qxF "$base" "$exported" || missing+=" $name"
	done <"$used"
	[ -z "$missing" ] || fail "named by rules or dashboard but not exported by the proxy:$missing"
	echo "all $(wc -l <"$used") metric names are exported"
}

check_dashboard() {
	step "Grafana dashboard"
	local d=deploy/grafana/callout-proxy.json panels exprs
	panels=$(jq '[.panels[] | select(.type != "row")] | length' "$d")
	exprs=$(jq '[.. | .expr? // empty] | length' "$d")
	[ "$panels" -gt 0 ] && [ "$exprs" -gt 0 ] || fail "$d: $panels panels, $exprs queries"
	[ "$(jq '[.panels[] | select(.type != "row") | select((.targets // []) | length == 0)] | length' "$d")" -eq 0 ] ||
		fail "$d: a panel without queries"
	echo "$panels panels, $exprs queries"
}

# HELM_VERSION is the helm CLI the chart is checked with, built from the Go
# module helm.sh/helm/v3 once per machine (go install caches it in
# $(go env GOPATH)/bin; a later run reuses it when the version matches).
HELM_VERSION=v3.22.0
helm_bin=""
install_helm() {
	helm_bin="$(go env GOPATH)/bin/helm"
	if [ -x "$helm_bin" ] && go version -m "$helm_bin" 2>/dev/null | grep -qE "^\s+mod\s+helm.sh/helm/v3\s+$HELM_VERSION\b"; then
		return 0
	fi
	step "building helm $HELM_VERSION (go install helm.sh/helm/v3/cmd/helm)"
	(cd "$work" && GOFLAGS= go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
}

check_helm() {
	step "Helm chart: helm lint --strict, helm template (deploy/helm/callout-proxy)"
	"$helm_bin" lint --strict deploy/helm/callout-proxy
	"$helm_bin" template callout-proxy deploy/helm/callout-proxy --kube-version 1.30.0 >"$work/chart.yaml"
	echo "rendered $(grep -c '^kind: ' "$work/chart.yaml") objects"
}

check_k8s_and_compose() {
	step "kustomize and helm render, strict decoding, chart = base, manifest and compose checks (deploy/k8s-check)"
	# -v, summarised by quiet_v: its tests' result lines are counted in the
	# suite's closing line (.ci/test.sh, proxy/internal/testsum).
	(cd deploy/k8s-check && go vet ./... && HELM="$helm_bin" CALLOUT_REQUIRE_HELM=1 \
		quiet_v "$work/k8s-check.log" go test -count=1 -vet=off -v ./...)
}

# --prepare: only compile what the checks need (helm, the static binaries'
# packages, deploy/k8s-check's dependencies) into the Go caches, and stop.
# The test command runs it in the background at the lowest CPU priority at
# its start, so those cold compiles (about 4 minutes on 2 cores) fill the
# cores the other steps leave idle; the checks below then find them cached.
if [ "${1:-}" = "--prepare" ]; then
	install_helm
	step "compiling the static binaries' packages (CGO_ENABLED=0 -trimpath)"
	CGO_ENABLED=0 go build -trimpath ./cmd/...
	step "compiling deploy/k8s-check and its tests"
	(cd deploy/k8s-check && go vet ./... && go test -count=1 -vet=off -run '^$' ./... >/dev/null)
	step "prepared"
	exit 0
fi

install_missing
check_dockerfile
check_binaries
check_rules
check_runbook_urls
check_metric_names
check_dashboard
install_helm
check_helm
check_k8s_and_compose
step "all checks passed"
