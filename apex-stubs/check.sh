#!/usr/bin/env bash
# Offline checks of the Apex side (apex-stubs/). No Salesforce org is used:
# the Apex tests themselves must run in an org (sf apex run test); this
# checks what can be checked without one, over both package directories
# with Apex (force-app, the product, and example-app, the example):
#   1. every .cls/.trigger parses (@apexdevtools/apex-parser, errors
#      collected by an error listener; the parser's own check() exits 0
#      even on syntax errors) - after proving on a broken snippet that a
#      syntax error is reported;
#   2. prettier --plugin=prettier-plugin-apex --check passes;
#   3. every metadata XML file is well formed (xmllint --noout);
#   4. scripts/check-metadata.mjs: every class/trigger has its -meta.xml
#      with apiVersion 68.0, sfdx-project.json's sourceApiVersion is 68.0,
#      force-app is an unlocked package depending on no other directory, and
#      the app metadata refers only to what exists (custom metadata records,
#      cache partition, Lightning app, record page, list views, report type,
#      reports, dashboard, permission sets);
#   5. the Apex semantic check (Apex Dev Tools' apex-ls CheckForIssues,
#      scripts/apex-semantic.sh): every type, method and custom field
#      resolves against the platform's library and the project's metadata,
#      zero errors, warnings listed - on the whole project, then on
#      force-app alone (what a production deploy ships must not need the
#      example);
#   6. scripts/check-soql-fields.mjs: every custom object and custom field
#      that a static [SELECT ...] names exists in the project's metadata
#      (apex-ls does not look inside SOQL), on both runs of 5;
#   7. PMD 7's Apex rules, categories security, errorprone, bestpractices and
#      performance (scripts/ApexPmd.java): zero security and errorprone
#      violations, every other one justified in pmd-suppressions.txt;
#   8. scripts/check-test-references.mjs force-app: every class of force-app
#      is named by a test class of force-app and every event of every
#      trigger is fired by one (DML of that kind on the object; a platform
#      event's: EventBus.publish + Test.getEventBus().deliver()),
#      the offline guard for a production deploy's coverage rule (coverage
#      itself needs an org);
#   9. scripts/prove-checks-bite.sh: in temporary copies of the project, a
#      bad method call, an unknown custom field in Apex and in SOQL, a
#      force-app class that needs the example, a SOQL injection, a class no
#      test names, a trigger no test fires and a trigger event
#      (after undelete) no test fires each make 5, 6, 7 or 8 fail,
#      and the clean copy passes; broken app metadata makes 4 fail.
# The Go test salesforce/fields_apex_test.go compares the object's field
# files with the Go side's field mapping (run by `go test ./salesforce/`).
#
# Needs Node >= 20.19 and npm. Installs the pinned devDependencies with
# `npm ci` when node_modules is missing or stale (the apex-ls and PMD jars
# come inside @salesforce/code-analyzer-pmd-engine; nothing else is
# downloaded), and with apt: libxml2-utils when xmllint is missing,
# openjdk-17-jre-headless when no Java 17 or later is found (JAVA_HOME, then
# java on PATH, then /usr/lib/jvm/java-17-openjdk-*). Idempotent; it leaves
# node_modules (gitignored).
#   bash apex-stubs/check.sh
set -euo pipefail
cd "$(dirname "$0")"

command -v node >/dev/null 2>&1 || { echo "check.sh: node is required" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "check.sh: npm is required" >&2; exit 1; }

if ! npm ls --depth=0 >/dev/null 2>&1; then
  echo "== apex-stubs: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

# java_major BIN: the major version of a java binary, or 0.
java_major() {
  local v
  v=$("$1" -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p' | head -n 1)
  echo "${v:-0}"
}
find_java() {
  local candidate
  for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)" /usr/lib/jvm/java-17-openjdk-*/bin/java; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && [ "$(java_major "$candidate")" -ge 17 ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

need_apt=()
command -v xmllint >/dev/null 2>&1 || need_apt+=(libxml2-utils)
JAVA=$(find_java) || { JAVA=""; need_apt+=(openjdk-17-jre-headless); }
if ((${#need_apt[@]})); then
  echo "== apex-stubs: installing ${need_apt[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if [ -z "$JAVA" ]; then
  JAVA=$(find_java) || { echo "check.sh: no Java 17 after installing openjdk-17-jre-headless" >&2; exit 1; }
fi
# ApexPmd.java runs in Java's source-file mode, which needs the compiler
# module (Debian's openjdk-17-jre-headless ships it in its module image).
if ! "$JAVA" --list-modules 2>/dev/null | grep -q '^jdk.compiler@'; then
  echo "check.sh: $JAVA has no jdk.compiler module (source-file mode); install openjdk-17-jre-headless" >&2
  exit 1
fi
APEX_JARS="$PWD/node_modules/@salesforce/code-analyzer-pmd-engine/dist/java-lib"
if ! ls "$APEX_JARS"/apex-ls_*.jar "$APEX_JARS"/pmd-apex-*.jar >/dev/null 2>&1; then
  echo "check.sh: no apex-ls or pmd-apex jar in $APEX_JARS (npm ci?)" >&2
  exit 1
fi
export JAVA APEX_JARS
echo "== apex-stubs: $("$JAVA" -version 2>&1 | head -n 1) at $JAVA; jars: $(cd "$APEX_JARS" && ls apex-ls_*.jar pmd-apex-*.jar | tr '\n' ' ')"

echo "== apex-stubs: parse every .cls/.trigger"
node scripts/parse-apex.mjs force-app example-app

echo "== apex-stubs: prettier-plugin-apex --check"
npx --no-install prettier --plugin=prettier-plugin-apex --check "{force-app,example-app}/**/*.{cls,trigger}"

echo "== apex-stubs: xmllint every metadata file"
mapfile -d '' xml_files < <(find force-app example-app credentials -name '*.xml' -print0 | sort -z)
if [ "${#xml_files[@]}" -eq 0 ]; then echo "no metadata XML found" >&2; exit 1; fi
xmllint --noout "${xml_files[@]}"
echo "xmllint: ${#xml_files[@]} files well formed"

echo "== apex-stubs: meta files, API versions, package definition, app metadata references"
node scripts/check-metadata.mjs

echo "== apex-stubs: semantic check (apex-ls), whole project"
bash scripts/apex-semantic.sh . "force-app + example-app"

echo "== apex-stubs: semantic check (apex-ls), force-app alone (a production deploy)"
solo=$(mktemp -d)
trap 'rm -rf "$solo"' EXIT
cp -R force-app credentials "$solo/"
node -e '
  const fs = require("node:fs");
  const p = JSON.parse(fs.readFileSync("sfdx-project.json", "utf8"));
  p.packageDirectories = p.packageDirectories.filter((d) => d.path !== "example-app");
  fs.writeFileSync(process.argv[1], JSON.stringify(p, null, 2));
' "$solo/sfdx-project.json"
bash scripts/apex-semantic.sh "$solo" "force-app alone"

echo "== apex-stubs: custom objects and fields named in static SOQL (apex-ls leaves SOQL unchecked)"
node scripts/check-soql-fields.mjs .
node scripts/check-soql-fields.mjs "$solo"

echo "== apex-stubs: PMD Apex rules (security, errorprone, bestpractices, performance)"
"$JAVA" -cp "$APEX_JARS/*" scripts/ApexPmd.java pmd-suppressions.txt force-app example-app

echo "== apex-stubs: every force-app class and trigger is reached by a force-app test (RunLocalTests coverage guard)"
node scripts/check-test-references.mjs force-app

echo "== apex-stubs: the semantic check, PMD, the test-reference and metadata checks fail on injected faults"
bash scripts/prove-checks-bite.sh
