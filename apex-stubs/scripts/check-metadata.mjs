#!/usr/bin/env node
// Structural checks of the SFDX project that need no org:
//  - sfdx-project.json is JSON, its sourceApiVersion is 68.0, and every
//    package directory exists;
//  - every .cls and .trigger has its -meta.xml, with <apiVersion>68.0 and
//    <status>Active; every class/trigger -meta.xml has its source file;
//  - every flow is on apiVersion 68.0.
// Exits non-zero listing every problem.
//
//   node scripts/check-metadata.mjs
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const API_VERSION = "68.0";
const problems = [];

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== "node_modules" && !name.startsWith(".")) out.push(...walk(path));
    } else {
      out.push(path);
    }
  }
  return out;
}

function tag(xml, name) {
  const m = xml.match(new RegExp(`<${name}>([^<]*)</${name}>`));
  return m ? m[1].trim() : null;
}

const project = JSON.parse(readFileSync("sfdx-project.json", "utf8"));
if (project.sourceApiVersion !== API_VERSION) {
  problems.push(`sfdx-project.json: sourceApiVersion is ${project.sourceApiVersion}, want ${API_VERSION}`);
}
const dirs = (project.packageDirectories ?? []).map((d) => d.path);
if (dirs.length === 0) problems.push("sfdx-project.json: no packageDirectories");
for (const dir of dirs) {
  if (!existsSync(dir)) problems.push(`sfdx-project.json: package directory ${dir} is missing`);
}

let sources = 0;
for (const file of dirs.filter((d) => existsSync(d)).flatMap(walk)) {
  if (file.endsWith(".cls") || file.endsWith(".trigger")) {
    sources++;
    const meta = `${file}-meta.xml`;
    if (!existsSync(meta)) {
      problems.push(`${file}: no ${meta}`);
      continue;
    }
    const xml = readFileSync(meta, "utf8");
    const root = file.endsWith(".cls") ? "ApexClass" : "ApexTrigger";
    if (!xml.includes(`<${root} `)) problems.push(`${meta}: root element is not ${root}`);
    if (tag(xml, "apiVersion") !== API_VERSION) {
      problems.push(`${meta}: apiVersion is ${tag(xml, "apiVersion")}, want ${API_VERSION}`);
    }
    if (tag(xml, "status") !== "Active") problems.push(`${meta}: status is not Active`);
  } else if (/\.(cls|trigger)-meta\.xml$/.test(file)) {
    const source = file.slice(0, -"-meta.xml".length);
    if (!existsSync(source)) problems.push(`${file}: no ${source}`);
  } else if (file.endsWith(".flow-meta.xml")) {
    const version = tag(readFileSync(file, "utf8"), "apiVersion");
    if (version !== API_VERSION) problems.push(`${file}: apiVersion is ${version}, want ${API_VERSION}`);
  }
}
if (sources === 0) problems.push("no .cls or .trigger files found");

for (const p of problems) console.error(p);
console.log(`check-metadata: ${sources} Apex sources checked, ${problems.length} problem(s)`);
process.exitCode = problems.length === 0 ? 0 : 1;
