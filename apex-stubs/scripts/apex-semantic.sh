#!/usr/bin/env bash
# The Apex semantic check of one SFDX workspace: Apex Dev Tools' apex-ls
# (io.github.apexdevtools.apexls.CheckForIssues) loads every package directory
# of the workspace's sfdx-project.json and resolves every type, method,
# field and custom field (objects/*/fields/*.field-meta.xml) against the
# platform's standard library (the standard-types and sobject-types jars) and
# the project's own metadata. Exits 0 with zero errors, listing the warnings
# (-d warnings: shadowed variables, unused locals, ...); exits 1 listing the
# errors otherwise. apex-ls exits 4 on errors (a missing or unreadable
# sfdx-project.json is an error too); any other exit is a failure of the tool.
#
# Needs JAVA (a Java 17 binary) and APEX_JARS (the dist/java-lib directory of
# @salesforce/code-analyzer-pmd-engine) in the environment; check.sh sets
# both.
#   scripts/apex-semantic.sh WORKSPACE [LABEL]
set -euo pipefail
workspace=$1
label=${2:-$workspace}
: "${JAVA:?JAVA must name a Java 17 binary}" "${APEX_JARS:?APEX_JARS must name the jar directory}"
[ -d "$workspace" ] || { echo "apex-ls [$label]: no directory $workspace" >&2; exit 1; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
# -n: no cache (apex-ls would otherwise write one under $HOME).
"$JAVA" -cp "$APEX_JARS/*" io.github.apexdevtools.apexls.CheckForIssues \
  -w "$workspace" -d warnings -n >"$out" 2>&1 || rc=$?

# apex-ls prints a file's absolute path, then its issues, one a line.
ws_abs=$(cd "$workspace" && pwd -P)
sed "s#$ws_abs/##g" "$out" >"$out.rel" && mv "$out.rel" "$out"
# Issue lines are "<Category>: line N ...": Warning and Unused are warnings,
# every other category (Error, Missing, Syntax) an error.
issues=$(grep -Ec '^[A-Za-z]+: line' "$out" || true)
warnings=$(grep -Ec '^(Warning|Unused): line' "$out" || true)
errors=$((issues - warnings))
sources=$(find "$workspace" -path '*/node_modules' -prune -o \( -name '*.cls' -o -name '*.trigger' \) -print | wc -l)

case $rc in
  0)
    if [ "$warnings" -gt 0 ]; then cat "$out"; fi
    if [ "$errors" -ne 0 ]; then
      cat "$out" >&2
      echo "apex-ls [$label]: exit 0 but $errors error line(s)" >&2
      exit 1
    fi
    echo "apex-ls [$label]: $sources Apex sources, 0 errors, $warnings warning(s)"
    ;;
  4)
    cat "$out" >&2
    echo "apex-ls [$label]: $errors error line(s), $warnings warning(s)" >&2
    exit 1
    ;;
  *)
    cat "$out" >&2
    echo "apex-ls [$label]: CheckForIssues failed with exit status $rc" >&2
    exit 1
    ;;
esac
