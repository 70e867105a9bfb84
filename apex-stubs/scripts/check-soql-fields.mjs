#!/usr/bin/env node
// Checks the custom fields that static SOQL names, which apex-ls leaves
// unchecked: it resolves `record.Field__c` in Apex expressions, but not the
// select list, WHERE, GROUP BY or ORDER BY of a [SELECT ...] query.
//
// For every static query in every .cls/.trigger of the package directories
// in sfdx-project.json (parsed with @apexdevtools/apex-parser):
//  - a FROM object ending in __c, __e or __mdt must be one of the project's
//    objects (objects/<Name>/<Name>.object-meta.xml);
//  - on such an object, every field named without a relationship path that
//    ends in __c must have objects/<Name>/fields/<Field>.field-meta.xml.
// Names compare case-insensitively, as Salesforce does. Standard objects and
// standard fields, relationship paths (ApexClass.Name), subqueries over child
// relationships and dynamic SOQL (Database.query strings) are not checked.
//
// Before trusting itself it checks two snippets in memory against the
// project's metadata: one naming an unknown field must be reported, one
// naming only known fields must not. Exits non-zero listing
// file:line: problem.
//
//   node scripts/check-soql-fields.mjs [PROJECT_DIR]   (default: the current directory)
import { existsSync, readFileSync } from "node:fs";
import {
  ApexErrorListener,
  ApexParserFactory,
  FieldNameContext,
  FromNameListContext,
  QueryContext,
  SubQueryContext,
} from "@apexdevtools/apex-parser";
import { walk } from "./files.mjs";

const CUSTOM_OBJECT = /__(c|e|mdt)$/i;
const CUSTOM_FIELD = /__c$/i;

/** Lower-case object name -> { name, fields: Set of lower-case field names }. */
function projectObjects(dirs) {
  const objects = new Map();
  for (const file of dirs.flatMap(walk)) {
    let m = file.match(/objects\/([^/]+)\/\1\.object-meta\.xml$/);
    if (m) {
      const key = m[1].toLowerCase();
      if (!objects.has(key)) objects.set(key, { name: m[1], fields: new Set() });
      continue;
    }
    m = file.match(/objects\/([^/]+)\/fields\/([^/]+)\.field-meta\.xml$/);
    if (m) {
      const key = m[1].toLowerCase();
      if (!objects.has(key)) objects.set(key, { name: m[1], fields: new Set() });
      objects.get(key).fields.add(m[2].toLowerCase());
    }
  }
  return objects;
}

/** The FieldName contexts of `query` itself: not of its FROM or nested queries. */
function ownFieldNames(query) {
  const out = [];
  const visit = (node) => {
    if (node !== query && (node instanceof QueryContext || node instanceof SubQueryContext)) return;
    if (node instanceof FromNameListContext) return;
    if (node instanceof FieldNameContext) {
      out.push(node);
      return;
    }
    for (let i = 0; i < (node.getChildCount?.() ?? 0); i++) visit(node.getChild(i));
  };
  visit(query);
  return out;
}

function fromObject(query) {
  for (let i = 0; i < query.getChildCount(); i++) {
    const child = query.getChild(i);
    if (child instanceof FromNameListContext) {
      const first = child.getChild(0);
      return { name: first.getText(), line: first.start.line };
    }
  }
  return null;
}

function queries(node, out = []) {
  if (node instanceof QueryContext) out.push(node);
  for (let i = 0; i < (node.getChildCount?.() ?? 0); i++) queries(node.getChild(i), out);
  return out;
}

/** The static queries of one source and their problems: [{ line, message }]. */
export function soqlCheck(source, isTrigger, objects) {
  const { parser } = ApexParserFactory.createLexerAndParser(source, new ApexErrorListener());
  const tree = isTrigger ? parser.triggerUnit() : parser.compilationUnit();
  const problems = [];
  const all = queries(tree);
  for (const query of all) {
    const from = fromObject(query);
    if (!from || !CUSTOM_OBJECT.test(from.name)) continue;
    const object = objects.get(from.name.toLowerCase());
    if (!object) {
      problems.push({ line: from.line, message: `FROM ${from.name}: no such object in the project` });
      continue;
    }
    for (const field of ownFieldNames(query)) {
      const name = field.getText();
      if (name.includes(".") || !CUSTOM_FIELD.test(name)) continue;
      if (!object.fields.has(name.toLowerCase())) {
        problems.push({
          line: field.start.line,
          message: `Unknown field '${name}' on ${object.name} in SOQL (no ${object.name}/fields/${name}.field-meta.xml)`,
        });
      }
    }
  }
  return { queries: all.length, problems };
}

function selfTest(objects) {
  const known = objects.get("failed_callout__c");
  if (!known || !known.fields.has("status__c")) {
    throw new Error("self-test: Failed_Callout__c.Status__c not found in the project's metadata");
  }
  const bad = "class T { void m() { Object o = [SELECT Id FROM Failed_Callout__c WHERE No_Such_Field__c = 1]; } }";
  const good =
    "class T { void m() { Object o = [SELECT Status__c s, COUNT(Id) n FROM Failed_Callout__c WHERE Status__c != null GROUP BY Status__c]; } }";
  if (soqlCheck(bad, false, objects).problems.length !== 1) {
    throw new Error("self-test: an unknown field in a WHERE clause was not reported");
  }
  const fine = soqlCheck(good, false, objects).problems;
  if (fine.length !== 0) {
    throw new Error(`self-test: a valid query reported ${fine.map((p) => p.message).join("; ")}`);
  }
}

function main(projectDir) {
  if (projectDir) process.chdir(projectDir);
  const project = JSON.parse(readFileSync("sfdx-project.json", "utf8"));
  const dirs = (project.packageDirectories ?? []).map((d) => d.path).filter((d) => existsSync(d));
  const objects = projectObjects(dirs);
  selfTest(objects);
  let files = 0;
  let checked = 0;
  let failures = 0;
  for (const file of dirs.flatMap(walk)) {
    if (!file.endsWith(".cls") && !file.endsWith(".trigger")) continue;
    files++;
    const result = soqlCheck(readFileSync(file, "utf8"), file.endsWith(".trigger"), objects);
    checked += result.queries;
    for (const p of result.problems) {
      console.error(`${file}:${p.line}: ${p.message}`);
      failures++;
    }
  }
  console.log(
    `check-soql-fields [${process.cwd()}]: ${files} Apex sources, ${checked} static queries, ${objects.size} project objects, ${failures} problem(s) (self-test ok)`,
  );
  return failures === 0 ? 0 : 1;
}

process.exitCode = main(process.argv[2]);
