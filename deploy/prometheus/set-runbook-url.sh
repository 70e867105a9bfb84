#!/usr/bin/env bash
# set-runbook-url.sh — point the alerts' runbook links at a runbook URL.
#
#   bash deploy/prometheus/set-runbook-url.sh [BASE_URL]
#
# Writes BASE_URL (default: the one in runbook.env) to runbook.env and sets
# every runbook_url annotation of alerts.yaml and alerts_test.yaml to
# BASE_URL#<alert name in lower case> (the alert's heading in
# deploy/README.md), so Alertmanager and Grafana show an absolute link that
# opens. BASE_URL must be an absolute http(s) URL without a fragment.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=/dev/null
. ./runbook.env
base=${1:-$RUNBOOK_BASE_URL}
case "$base" in
http://* | https://*) ;;
*) echo "set-runbook-url.sh: $base is not an absolute http(s) URL" >&2; exit 2 ;;
esac
case "$base" in *'#'*) echo "set-runbook-url.sh: $base has a fragment; give the page's URL" >&2; exit 2 ;; esac
sed -i -E "s#^RUNBOOK_BASE_URL=.*#RUNBOOK_BASE_URL=$base#" runbook.env
for f in alerts.yaml alerts_test.yaml; do
	# runbook_url: "<anything>#anchor" -> runbook_url: "$base#anchor"
	sed -i -E "s#^( *runbook_url: \")[^\"]*\#([a-z0-9-]+)\"#\1$base\#\2\"#" "$f"
done
echo "runbook links: $base#<alert>"
