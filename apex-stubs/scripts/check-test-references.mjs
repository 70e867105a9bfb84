#!/usr/bin/env node
// The offline guard for a production deploy's coverage rule. A deploy to
// production fails unless unit tests cover 75 % of the Apex and "every
// trigger must have some test coverage" ("Writing Tests", Apex Developer
// Guide; "Test Your Platform Event in Apex", Platform Events Developer
// Guide: platform event triggers need tests too). Coverage cannot be measured
// without an org, so this checks what makes coverage possible, for one
// package directory on its own (a production deploy ships force-app alone):
//
//  - every non-test class is named by at least one test class of the same
//    directory (a class no test names cannot be covered by it);
//  - every trigger is fired by at least one test class of the same
//    directory: for a trigger on a platform event (X__e), a test that names
//    X__e, calls EventBus.publish and delivers with
//    Test.getEventBus().deliver() (events published in a test are delivered
//    by deliver() or Test.stopTest(); deliver() is the explicit form);
//    for a trigger on any other object, for each event kind the trigger
//    declares (insert, update, delete, undelete, before or after), a test
//    that names the object and makes DML that fires that kind: a trigger
//    runs only for the DML operations its events name ("Triggers" and
//    "Triggers and Merge Statements", Apex Developer Guide: upsert fires
//    insert or update triggers, merge fires delete triggers on the losing
//    records and update triggers on the winner), so an `after undelete`
//    trigger that no test undeletes for has 0 % coverage. This is per
//    test class, not per statement: a test that names the object and
//    undeletes anything counts.
//
// A test class is a .cls whose class declaration carries @IsTest. Comments
// and string literals are removed before names are looked for, and Apex
// names are matched case-insensitively, as the language treats them.
// Exits 1 listing every class and trigger that no test reaches.
//
//   node scripts/check-test-references.mjs [package-dir]   (default force-app)
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join, relative } from "node:path";

const root = process.argv[2] ?? "force-app";

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else out.push(path);
  }
  return out;
}

/** Apex source without comments and string literals (kept as ''). */
export function stripApex(source) {
  let out = "";
  let i = 0;
  while (i < source.length) {
    const two = source.slice(i, i + 2);
    if (two === "//") {
      while (i < source.length && source[i] !== "\n") i++;
    } else if (two === "/*") {
      const end = source.indexOf("*/", i + 2);
      i = end < 0 ? source.length : end + 2;
      out += " ";
    } else if (source[i] === "'") {
      i++;
      while (i < source.length && source[i] !== "'") i += source[i] === "\\" ? 2 : 1;
      i++;
      out += "''";
    } else {
      out += source[i++];
    }
  }
  return out;
}

/** True when `code` (stripped) names `identifier` as a whole word. */
function names(code, identifier) {
  const escaped = identifier.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^A-Za-z0-9_])${escaped}($|[^A-Za-z0-9_])`, "i").test(code);
}

/** True when the class declaration (before its first '{') carries @IsTest. */
function isTestClass(code) {
  const head = code.slice(0, code.indexOf("{") < 0 ? code.length : code.indexOf("{"));
  return /@IsTest\b/i.test(head);
}

/** DML statement or Database method of one verb, in stripped code. */
const verb = (v) =>
  new RegExp(`(^|[^A-Za-z0-9_.])${v}\\s|Database\\s*\\.\\s*${v}\\w*\\s*\\(`, "i");
/** The DML verbs that fire a trigger event of each kind ("Triggers", "Triggers and Merge Statements"). */
const FIRES = {
  insert: ["insert", "upsert"],
  update: ["update", "upsert", "merge"],
  delete: ["delete", "merge"],
  undelete: ["undelete"],
};
const EVENT_DML = Object.fromEntries(
  Object.entries(FIRES).map(([kind, verbs]) => [kind, verbs.map(verb)]),
);
const PUBLISH = /EventBus\s*\.\s*publish\s*\(/i;
const DELIVER = /Test\s*\.\s*getEventBus\s*\(\s*\)\s*\.\s*deliver\s*\(\s*\)/i;

const files = walk(root);
const classes = [];
const tests = [];
const triggers = [];
for (const file of files) {
  if (file.endsWith(".cls")) {
    const code = stripApex(readFileSync(file, "utf8"));
    const entry = { file, name: basename(file, ".cls"), code };
    (isTestClass(code) ? tests : classes).push(entry);
  } else if (file.endsWith(".trigger")) {
    const code = stripApex(readFileSync(file, "utf8"));
    const m = code.match(/trigger\s+(\w+)\s+on\s+(\w+)\s*\(([^)]*)\)/i);
    const kinds = m ? [...m[3].matchAll(/\b(?:before|after)\s+(insert|update|delete|undelete)\b/gi)] : [];
    if (!m || kinds.length === 0) {
      console.error(`${file}: no "trigger <Name> on <Object>(<events>)" declaration found`);
      process.exitCode = 1;
      continue;
    }
    const events = [...new Set(kinds.map((k) => k[1].toLowerCase()))];
    triggers.push({ file, name: m[1], object: m[2], events });
  }
}

const problems = [];
if (tests.length === 0) problems.push(`${root}: no test class (@IsTest) at all`);
for (const c of classes) {
  if (!tests.some((t) => t.name !== c.name && names(t.code, c.name))) {
    problems.push(`${relative(".", c.file)}: class ${c.name} is named by no test class of ${root}`);
  }
}
for (const tr of triggers) {
  const naming = tests.filter((t) => names(t.code, tr.object));
  if (/__e$/i.test(tr.object)) {
    // A platform event trigger is after insert only; publish + deliver fires it.
    if (!naming.some((t) => PUBLISH.test(t.code) && DELIVER.test(t.code))) {
      problems.push(
        `${relative(".", tr.file)}: trigger ${tr.name} is fired by no test class of ${root} ` +
          `(none publishes ${tr.object} with EventBus.publish and delivers it with Test.getEventBus().deliver())`,
      );
    }
    continue;
  }
  for (const kind of tr.events) {
    if (!naming.some((t) => EVENT_DML[kind].some((re) => re.test(t.code)))) {
      problems.push(
        `${relative(".", tr.file)}: trigger ${tr.name} event ${kind} is fired by no test class of ${root} ` +
          `(none names ${tr.object} and makes ${FIRES[kind].join("/")} DML)`,
      );
    }
  }
}

for (const p of problems) console.error(p);
console.log(
  `check-test-references [${root}]: ${classes.length} classes, ${triggers.length} trigger(s), ` +
    `${tests.length} test classes, ${problems.length} problem(s)`,
);
if (problems.length) process.exitCode = 1;
