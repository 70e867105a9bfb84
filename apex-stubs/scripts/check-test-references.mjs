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
//    for a trigger on any other object, a test that names the object and
//    makes DML (insert/update/upsert/delete/undelete or Database.*).
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

const DML = /(^|[^A-Za-z0-9_.])(insert|update|upsert|delete|undelete)\s|Database\s*\.\s*(insert|update|upsert|delete|undelete)\w*\s*\(/i;
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
    const m = code.match(/trigger\s+(\w+)\s+on\s+(\w+)\s*\(/i);
    if (!m) {
      console.error(`${file}: no "trigger <Name> on <Object>(" declaration found`);
      process.exitCode = 1;
      continue;
    }
    triggers.push({ file, name: m[1], object: m[2] });
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
  const isEvent = /__e$/i.test(tr.object);
  const firing = tests.filter((t) =>
    names(t.code, tr.object) &&
    (isEvent ? PUBLISH.test(t.code) && DELIVER.test(t.code) : DML.test(t.code)),
  );
  if (firing.length === 0) {
    const how = isEvent
      ? `publishes ${tr.object} with EventBus.publish and delivers it with Test.getEventBus().deliver()`
      : `makes DML on ${tr.object}`;
    problems.push(`${relative(".", tr.file)}: trigger ${tr.name} is fired by no test class of ${root} (none ${how})`);
  }
}

for (const p of problems) console.error(p);
console.log(
  `check-test-references [${root}]: ${classes.length} classes, ${triggers.length} trigger(s), ` +
    `${tests.length} test classes, ${problems.length} problem(s)`,
);
if (problems.length) process.exitCode = 1;
