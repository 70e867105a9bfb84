#!/usr/bin/env bash
# Proves that the semantic checks and PMD catch what they are there for, so a
# green check.sh means something. Each case copies the project (sources and
# metadata, no node_modules) into a fresh temporary directory, adds one small
# probe class, and runs the same check check.sh runs:
#   clean          a probe that calls String.valueOf and reads
#                  Failed_Callout__c.Status__c and Payment_Request__c.Amount__c:
#                  apex-ls must pass (the copy and the probe are sound);
#   bad method     the same probe calling String.valueOfx(1): apex-ls must fail
#                  with "No matching method found for 'valueOfx'";
#   unknown field  the example-app probe reading Payment_Request__c.Amount_Typo__c:
#                  apex-ls must fail with "Unknown field 'Amount_Typo__c'";
#   SOQL field     an example-app probe selecting Payment_Request__c.Amount_Typo__c
#                  in a static query, which apex-ls does not check:
#                  scripts/check-soql-fields.mjs must fail;
#   isolation      force-app alone (sfdx-project.json without example-app) with
#                  a force-app probe that names Payment_Request__c: apex-ls must
#                  fail, so the force-app-only run in check.sh would catch a
#                  production package that needs the example;
#   SOQL injection a probe that concatenates a parameter into Database.query:
#                  PMD must fail with ApexSOQLInjection (security);
#   untested class a force-app class that no force-app test names:
#                  scripts/check-test-references.mjs must fail naming it;
#   unfired trigger force-app without CalloutResultTriggerTest (the only test
#                  that publishes and delivers Callout_Result__e):
#                  check-test-references must fail naming CalloutResultTrigger;
#   unfired event  a force-app trigger on Failed_Callout__c(after undelete):
#                  tests make DML on the object but none undeletes, so
#                  check-test-references must fail naming the undelete event;
#   app metadata   a record page naming Record.Attempt_Log_Typo__c, a report
#                  column that is not in its report type, a list view filter
#                  on a Status__c value that does not exist, a dashboard on a
#                  missing report, a custom metadata record with an unknown
#                  field, and force-app depending on the example:
#                  scripts/check-metadata.mjs must fail naming each one.
# Exits 1 naming the case that did not behave.
#
# Needs JAVA and APEX_JARS (see scripts/apex-semantic.sh); check.sh sets them.
#   scripts/prove-checks-bite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${JAVA:?JAVA must name a Java 17 binary}" "${APEX_JARS:?APEX_JARS must name the jar directory}"
here=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy NAME [DIR...]: the project's metadata into $work/NAME; with DIRs, only
# those package directories, in sfdx-project.json too.
copy() {
  local name=$1; shift
  local dest="$work/$name"
  mkdir -p "$dest"
  if [ "$#" -eq 0 ]; then
    cp -R sfdx-project.json pmd-suppressions.txt force-app credentials example-app "$dest/"
  else
    cp -R pmd-suppressions.txt "$@" "$dest/"
    node -e '
      const fs = require("node:fs");
      const [src, dst, ...keep] = process.argv.slice(1);
      const p = JSON.parse(fs.readFileSync(src, "utf8"));
      p.packageDirectories = p.packageDirectories.filter((d) => keep.includes(d.path));
      if (!p.packageDirectories.some((d) => d.default)) p.packageDirectories[0].default = true;
      fs.writeFileSync(dst, JSON.stringify(p, null, 2));
    ' sfdx-project.json "$dest/sfdx-project.json" "$@"
  fi
  echo "$dest"
}

# probe WORKSPACE PACKAGE_DIR CLASS BODY: adds a class and its meta file.
probe() {
  local dir="$1/$2/main/default/classes"
  mkdir -p "$dir"
  printf '%s\n' "$4" >"$dir/$3.cls"
  cat >"$dir/$3.cls-meta.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<ApexClass xmlns="http://soap.sforce.com/2006/04/metadata">
    <apiVersion>68.0</apiVersion>
    <status>Active</status>
</ApexClass>
XML
}

force_probe() { # the force-app probe, with $1 as the String method it calls
  printf 'public with sharing class CheckProbe {\n  public static String describe(Failed_Callout__c record) {\n    return String.%s(1) + record.Status__c;\n  }\n}' "$1"
}
example_probe() { # the example-app probe, reading field $1 of Payment_Request__c
  printf 'public with sharing class ExampleCheckProbe {\n  public static Object amount(Payment_Request__c payment) {\n    return payment.%s;\n  }\n}' "$1"
}

failures=0
# expect_fail LABEL LOG WANT: the check failed and LOG names WANT.
expect_fail() {
  if grep -qF -- "$3" "$2"; then
    echo "bite [$1]: failed as it must ($3)"
  else
    echo "bite [$1]: did NOT fail with \"$3\"; output:" >&2
    cat "$2" >&2
    failures=$((failures + 1))
  fi
}

# must_fail LABEL LOG PASSED WANT CMD...: CMD, its output in LOG, must fail
# and name WANT; PASSED says what it let through when it does not fail.
must_fail() {
  local label=$1 log=$2 passed=$3 want=$4
  shift 4
  if "$@" >"$log" 2>&1; then
    echo "bite [$label]: $passed" >&2; failures=$((failures + 1))
  else
    expect_fail "$label" "$log" "$want"
  fi
}

# in_dir DIR CMD...: CMD run in DIR.
in_dir() {
  (cd "$1" && shift && "$@")
}

ws=$(copy clean)
probe "$ws" force-app CheckProbe "$(force_probe valueOf)"
probe "$ws" example-app ExampleCheckProbe "$(example_probe Amount__c)"
if bash scripts/apex-semantic.sh "$ws" "bite: clean copy with probes" >"$work/clean.log" 2>&1; then
  cat "$work/clean.log"
else
  echo "bite [clean]: the clean copy with valid probes did not pass:" >&2
  cat "$work/clean.log" >&2
  failures=$((failures + 1))
fi

ws=$(copy bad-method)
probe "$ws" force-app CheckProbe "$(force_probe valueOfx)"
must_fail "bad method" "$work/method.log" "apex-ls passed String.valueOfx(1)" \
  "No matching method found for 'valueOfx'" bash scripts/apex-semantic.sh "$ws" "bite: bad method"

ws=$(copy unknown-field)
probe "$ws" example-app ExampleCheckProbe "$(example_probe Amount_Typo__c)"
must_fail "unknown field" "$work/field.log" "apex-ls passed Payment_Request__c.Amount_Typo__c" \
  "Unknown field 'Amount_Typo__c'" bash scripts/apex-semantic.sh "$ws" "bite: unknown field"

ws=$(copy soql-field)
probe "$ws" example-app ExampleCheckProbe "public with sharing class ExampleCheckProbe {
  public static List<Payment_Request__c> amounts() {
    return [SELECT Amount_Typo__c FROM Payment_Request__c LIMIT 10];
  }
}"
must_fail "SOQL field" "$work/soql.log" "check-soql-fields passed SELECT Amount_Typo__c" \
  "Unknown field 'Amount_Typo__c' on Payment_Request__c in SOQL" node scripts/check-soql-fields.mjs "$ws"

ws=$(copy isolation force-app credentials)
probe "$ws" force-app CheckProbe "$(example_probe Amount__c | sed 's/ExampleCheckProbe/CheckProbe/')"
must_fail "isolation" "$work/isolation.log" "force-app alone compiled a reference to Payment_Request__c" \
  "No type declaration found for 'Schema.Payment_Request__c'" bash scripts/apex-semantic.sh "$ws" "bite: force-app alone"

ws=$(copy soql-injection)
probe "$ws" force-app CheckProbe "public with sharing class CheckProbe {
  public static List<Failed_Callout__c> byEndpoint(String endpoint) {
    return Database.query(
      'SELECT Id FROM Failed_Callout__c WHERE Endpoint__c = \\'' + endpoint + '\\''
    );
  }
}"
must_fail "SOQL injection" "$work/pmd.log" "PMD passed a concatenated Database.query" \
  "CheckProbe.cls:4: ApexSOQLInjection (security)" \
  in_dir "$ws" "$JAVA" -cp "$APEX_JARS/*" "$here/scripts/ApexPmd.java" pmd-suppressions.txt force-app example-app

ws=$(copy untested-class force-app credentials)
probe "$ws" force-app CheckProbe "$(force_probe valueOf)"
must_fail "untested class" "$work/untested.log" "check-test-references passed a class no test names" \
  "class CheckProbe is named by no test class of force-app" \
  in_dir "$ws" node "$here/scripts/check-test-references.mjs" force-app

ws=$(copy unfired-trigger force-app credentials)
rm "$ws"/force-app/main/default/classes/CalloutResultTriggerTest.cls*
must_fail "unfired trigger" "$work/unfired.log" \
  "check-test-references passed CalloutResultTrigger with no test delivering its event" \
  "trigger CalloutResultTrigger is fired by no test class of force-app" \
  in_dir "$ws" node "$here/scripts/check-test-references.mjs" force-app

ws=$(copy unfired-event force-app credentials)
t="$ws/force-app/main/default/triggers"
echo 'trigger CheckProbeTrigger on Failed_Callout__c(after undelete) { CalloutProxySettings.purgeAfterDays(); }' >"$t/CheckProbeTrigger.trigger"
cp "$t/CalloutResultTrigger.trigger-meta.xml" "$t/CheckProbeTrigger.trigger-meta.xml"
must_fail "unfired event" "$work/unfired-event.log" \
  "check-test-references passed an after undelete trigger that no test undeletes for" \
  "trigger CheckProbeTrigger event undelete is fired by no test class of force-app" \
  in_dir "$ws" node "$here/scripts/check-test-references.mjs" force-app

ws=$(copy app-metadata)
d="$ws/force-app/main/default"
sed -i 's#Record.Attempt_Log__c#Record.Attempt_Log_Typo__c#' "$d/flexipages/Failed_Callout_Record_Page.flexipage-meta.xml"
sed -i 's#<field>Failed_Callout__c\$Method__c</field>#<field>Failed_Callout__c$Method_Typo__c</field>#' "$d/reports/Callout_Proxy/Dead_Letters_by_Endpoint.report-meta.xml"
sed -i 's#New,Failed Again#New,Failed Agian#' "$d/objects/Failed_Callout__c/listViews/Needs_Attention.listView-meta.xml"
sed -i 's#Callout_Proxy/Dead_Letters_by_Reason#Callout_Proxy/Dead_Letters_by_Reasons#' "$d/dashboards/Callout_Proxy/Dead_Letters.dashboard-meta.xml"
sed -i 's#<field>Purge_After_Days__c</field>#<field>Purge_Days__c</field>#' "$d/customMetadata/Callout_Proxy_Setting.Default.md-meta.xml"
node -e '
  const fs = require("node:fs");
  const f = process.argv[1];
  const p = JSON.parse(fs.readFileSync(f, "utf8"));
  p.packageDirectories[0].dependencies = [{ package: "example-app" }];
  fs.writeFileSync(f, JSON.stringify(p, null, 2));
' "$ws/sfdx-project.json"
if node scripts/check-metadata.mjs "$ws" >"$work/metadata.log" 2>&1; then
  echo "bite [app metadata]: check-metadata passed broken app metadata" >&2; failures=$((failures + 1))
else
  expect_fail "record page field" "$work/metadata.log" "Record.Attempt_Log_Typo__c is not a field of Failed_Callout__c"
  expect_fail "report column" "$work/metadata.log" 'Failed_Callout__c$Method_Typo__c is not a column of report type Failed_Callouts__c'
  expect_fail "list view value" "$work/metadata.log" 'filter value "Failed Agian" is not a value of picklist Failed_Callout__c.Status__c'
  expect_fail "dashboard report" "$work/metadata.log" "report Callout_Proxy/Dead_Letters_by_Reasons is not defined in force-app"
  expect_fail "custom metadata field" "$work/metadata.log" "Callout_Proxy_Setting__mdt has no field Purge_Days__c"
  expect_fail "package dependency" "$work/metadata.log" "force-app depends on example-app"
fi

if [ "$failures" -ne 0 ]; then
  echo "prove-checks-bite: $failures case(s) did not behave" >&2
  exit 1
fi
echo "prove-checks-bite: 10 cases behaved (clean passes; bad method, unknown field, unknown SOQL field, force-app isolation, SOQL injection, an untested class, an unfired trigger, an unfired trigger event and six kinds of broken app metadata fail)"
