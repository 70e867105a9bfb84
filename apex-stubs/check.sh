#!/usr/bin/env bash
# Offline checks of the Apex side (apex-stubs/). No Salesforce org is used:
# the Apex tests themselves must run in an org (sf apex run test); this
# checks what can be checked without one.
#   1. every .cls/.trigger parses (@apexdevtools/apex-parser, errors
#      collected by an error listener; the parser's own check() exits 0
#      even on syntax errors) - after proving on a broken snippet that a
#      syntax error is reported;
#   2. prettier --plugin=prettier-plugin-apex --check passes;
#   3. every metadata XML file is well formed (xmllint --noout);
#   4. every class/trigger has its -meta.xml with apiVersion 68.0, and
#      sfdx-project.json's sourceApiVersion is 68.0.
# The Go test salesforce/fields_apex_test.go compares the object's field
# files with the Go side's field mapping (run by `go test ./salesforce/`).
#
# Needs Node >= 20.19 and npm; installs the pinned devDependencies with
# `npm ci` when node_modules is missing or stale, and libxml2-utils with apt
# when xmllint is missing. Idempotent; it leaves node_modules (gitignored).
#   bash apex-stubs/check.sh
set -euo pipefail
cd "$(dirname "$0")"

command -v node >/dev/null 2>&1 || { echo "check.sh: node is required" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "check.sh: npm is required" >&2; exit 1; }

if ! npm ls --depth=0 >/dev/null 2>&1; then
  echo "== apex-stubs: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

if ! command -v xmllint >/dev/null 2>&1; then
  echo "== apex-stubs: installing libxml2-utils (xmllint)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libxml2-utils >/dev/null
fi

echo "== apex-stubs: parse every .cls/.trigger"
node scripts/parse-apex.mjs force-app

echo "== apex-stubs: prettier-plugin-apex --check"
npx --no-install prettier --plugin=prettier-plugin-apex --check "force-app/**/*.{cls,trigger}"

echo "== apex-stubs: xmllint every metadata file"
mapfile -d '' xml_files < <(find force-app credentials -name '*.xml' -print0 | sort -z)
if [ "${#xml_files[@]}" -eq 0 ]; then echo "no metadata XML found" >&2; exit 1; fi
xmllint --noout "${xml_files[@]}"
echo "xmllint: ${#xml_files[@]} files well formed"

echo "== apex-stubs: meta files and API versions"
node scripts/check-metadata.mjs
