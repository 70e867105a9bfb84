#!/usr/bin/env node
// Structural checks of the SFDX project that need no org:
//  - sfdx-project.json is JSON, its sourceApiVersion is 68.0, and every
//    package directory exists;
//  - every .cls and .trigger has its -meta.xml, with <apiVersion>68.0 and
//    <status>Active; every class/trigger -meta.xml has its source file;
//  - every flow is on apiVersion 68.0;
//  - the package definition: force-app is an unlocked package (package,
//    versionName, versionNumber major.minor.patch.build|NEXT) that depends on
//    no other package directory of the project, example-app above all
//    ("Project Configuration File for a Second-Generation Package",
//    Salesforce DX Developer Guide), and packageAliases name 0Ho/04t ids;
//  - and, per metadata type of each package directory (field names are
//    those of objects/<Object>/fields/*.field-meta.xml plus the standard
//    fields every custom object has):
//      custom metadata records: the type and every field exist;
//      cache partitions: the name is alphanumeric, an Organization type is
//        listed, and every 'local.<Partition>' an Apex class names exists;
//      list views: every column and filter field exists, and a filter on a
//        picklist names only values of that picklist;
//      Lightning record pages (FlexiPage): the object exists, every
//        Record.<field> exists on it, every facet a component names is a
//        region of the page;
//      Lightning apps (CustomApplication): every tab exists, every
//        Flexipage override names a page of that object;
//      report types: the base object and every column field exist;
//      reports: the folder and report type exist, every field is a column
//        of the report type;
//      dashboards: the folder and every report exist, and a dashboard
//        naming no running user is LoggedInUser;
//      permission sets: every object, field, tab, class and app exists;
//      Change Data Capture selections (PlatformEventChannelMember): the
//        channel is ChangeEvents, the entity is the change event of an
//        object of the directory (X__c -> X__ChangeEvent), and the file is
//        named ChangeEvents_<entity, double underscores written once>
//        ("PlatformEventChannelMember", Metadata API Developer Guide).
// Exits non-zero listing every problem.
//
//   node scripts/check-metadata.mjs [project-dir]   (default: the current one)
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { walk } from "./files.mjs";

if (process.argv[2]) process.chdir(process.argv[2]);

const API_VERSION = "68.0";
const problems = [];

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

// ---- the package definition -------------------------------------------
const forceApp = (project.packageDirectories ?? []).find((d) => d.path === "force-app");
if (!forceApp) {
  problems.push("sfdx-project.json: no force-app package directory");
} else {
  for (const key of ["package", "versionName", "versionNumber"]) {
    if (!forceApp[key]) problems.push(`sfdx-project.json: force-app has no ${key} (an unlocked package needs it)`);
  }
  if (forceApp.versionNumber && !/^\d+\.\d+\.\d+\.(\d+|NEXT)$/.test(forceApp.versionNumber)) {
    problems.push(`sfdx-project.json: force-app versionNumber ${forceApp.versionNumber} is not major.minor.patch.build or .NEXT`);
  }
  const localPackages = new Map(
    (project.packageDirectories ?? []).filter((d) => d.package).map((d) => [d.package, d.path]),
  );
  for (const dep of forceApp.dependencies ?? []) {
    const name = dep.package ?? "";
    if (localPackages.has(name) || dirs.includes(name) || /example/i.test(name)) {
      problems.push(`sfdx-project.json: force-app depends on ${name}, a directory of this project; it must install alone`);
    }
  }
}
for (const [alias, id] of Object.entries(project.packageAliases ?? {})) {
  if (!/^(0Ho|04t)[A-Za-z0-9]{12}([A-Za-z0-9]{3})?$/.test(String(id))) {
    problems.push(`sfdx-project.json: packageAliases.${alias} is ${id}, not a 0Ho or 04t id`);
  }
}

// ---- metadata references -------------------------------------------------
const checked = {};
function count(kind) { checked[kind] = (checked[kind] ?? 0) + 1; }
function all(xml, name) {
  return [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, "g"))].map((m) => m[1].trim());
}
function blocks(xml, name) {
  return [...xml.matchAll(new RegExp(`<${name}>([\\s\\S]*?)</${name}>`, "g"))].map((m) => m[1]);
}
function filesIn(dir, suffix) {
  return existsSync(dir) ? walk(dir).filter((f) => f.endsWith(suffix)) : [];
}
const STANDARD_FIELDS = ["Id", "Name", "OwnerId", "CreatedDate", "CreatedById", "LastModifiedDate", "LastModifiedById", "SystemModstamp"];
// List view columns name standard fields by these tokens.
const LIST_VIEW_TOKENS = ["NAME", "CREATED_DATE", "LAST_UPDATE", "OWNER.ALIAS", "OWNER.FIRST_NAME", "OWNER.LAST_NAME", "CREATEDBY_USER.ALIAS", "UPDATEDBY_USER.ALIAS"];

/** The objects of one package directory: name -> Map(field -> picklist values or null). */
function objectsOf(dir) {
  const objects = new Map();
  for (const file of filesIn(join(dir, "main", "default", "objects"), ".object-meta.xml")) {
    const name = basename(file, ".object-meta.xml");
    const fields = new Map(STANDARD_FIELDS.map((f) => [f, null]));
    for (const ff of filesIn(join(dirname(file), "fields"), ".field-meta.xml")) {
      const xml = readFileSync(ff, "utf8");
      const values = /<type>(Multiselect)?Picklist<\/type>/.test(xml)
        ? blocks(xml, "value").map((v) => tag(v, "fullName")).filter(Boolean)
        : null;
      fields.set(basename(ff, ".field-meta.xml"), values);
    }
    objects.set(name, fields);
  }
  return objects;
}

for (const dir of dirs.filter((d) => existsSync(d))) {
  const base = join(dir, "main", "default");
  // force-app stands alone; every other directory is deployed after it and may use its objects.
  const objects = dir === "force-app" || !existsSync("force-app")
    ? objectsOf(dir)
    : new Map([...objectsOf("force-app"), ...objectsOf(dir)]);
  const hasField = (object, field) => objects.get(object)?.has(field) === true;
  const tabs = new Set(filesIn(join(base, "tabs"), ".tab-meta.xml").map((f) => basename(f, ".tab-meta.xml")));
  const classes = new Set(filesIn(join(base, "classes"), ".cls").map((f) => basename(f, ".cls")));
  const apps = new Set(filesIn(join(base, "applications"), ".app-meta.xml").map((f) => basename(f, ".app-meta.xml")));
  const pages = new Map(filesIn(join(base, "flexipages"), ".flexipage-meta.xml").map((f) => [basename(f, ".flexipage-meta.xml"), readFileSync(f, "utf8")]));

  for (const file of filesIn(join(base, "customMetadata"), ".md-meta.xml")) {
    count("custom metadata records");
    const type = basename(file, ".md-meta.xml").split(".")[0] + "__mdt";
    if (!objects.has(type)) { problems.push(`${file}: custom metadata type ${type} is not defined`); continue; }
    for (const field of all(readFileSync(file, "utf8"), "field")) {
      if (!hasField(type, field)) problems.push(`${file}: ${type} has no field ${field}`);
    }
  }

  const partitions = new Set();
  for (const file of filesIn(join(base, "cachePartitions"), ".cachePartition-meta.xml")) {
    count("cache partitions");
    const name = basename(file, ".cachePartition-meta.xml");
    partitions.add(name.toLowerCase());
    const xml = readFileSync(file, "utf8");
    if (!/^[A-Za-z0-9]+$/.test(name)) problems.push(`${file}: partition name ${name} is not alphanumeric`);
    if (tag(xml, "masterLabel") === null) problems.push(`${file}: no masterLabel`);
    if (!all(xml, "cacheType").includes("Organization")) problems.push(`${file}: no Organization cache type`);
  }
  for (const file of filesIn(join(base, "classes"), ".cls")) {
    const source = readFileSync(file, "utf8");
    if (/@IsTest\b[\s\S]*?\bclass\b/i.test(source.slice(0, source.indexOf("{")))) continue; // tests may name a missing one on purpose
    for (const m of source.matchAll(/'local\.([A-Za-z0-9_]+)'/g)) {
      if (!partitions.has(m[1].toLowerCase())) problems.push(`${file}: names cache partition local.${m[1]}, which ${dir} does not define`);
    }
  }

  for (const file of filesIn(join(base, "objects"), ".listView-meta.xml")) {
    count("list views");
    const object = basename(dirname(dirname(file)));
    const xml = readFileSync(file, "utf8");
    for (const column of all(xml, "columns")) {
      if (!LIST_VIEW_TOKENS.includes(column) && !hasField(object, column)) problems.push(`${file}: column ${column} is not a field of ${object}`);
    }
    for (const filter of blocks(xml, "filters")) {
      const field = tag(filter, "field");
      if (!LIST_VIEW_TOKENS.includes(field) && !hasField(object, field)) { problems.push(`${file}: filter field ${field} is not a field of ${object}`); continue; }
      const values = objects.get(object)?.get(field);
      for (const value of values ? (tag(filter, "value") ?? "").split(",") : []) {
        if (!values.includes(value.trim())) problems.push(`${file}: filter value "${value}" is not a value of picklist ${object}.${field}`);
      }
    }
  }

  for (const [name, xml] of pages) {
    count("record pages");
    const file = join(base, "flexipages", `${name}.flexipage-meta.xml`);
    const object = tag(xml, "sobjectType");
    if (tag(xml, "type") === "RecordPage" && !objects.has(object)) problems.push(`${file}: sobjectType ${object} is not an object of ${dir}`);
    for (const item of all(xml, "fieldItem")) {
      const field = item.replace(/^Record\./, "");
      if (!hasField(object, field)) problems.push(`${file}: ${item} is not a field of ${object}`);
    }
    const regions = new Set(blocks(xml, "flexiPageRegions").map((r) => tag(r.replace(/<itemInstances>[\s\S]*<\/itemInstances>/, ""), "name")));
    for (const value of all(xml, "value").filter((v) => v.startsWith("Facet-"))) {
      if (!regions.has(value)) problems.push(`${file}: a component names facet ${value}, which is no region of the page`);
    }
  }

  for (const file of filesIn(join(base, "applications"), ".app-meta.xml")) {
    count("Lightning apps");
    const xml = readFileSync(file, "utf8");
    for (const t of all(xml, "tabs")) {
      if (!t.startsWith("standard-") && !tabs.has(t)) problems.push(`${file}: tab ${t} is not a tab of ${dir}`);
    }
    for (const o of blocks(xml, "actionOverrides")) {
      if (tag(o, "type") !== "Flexipage") continue;
      const page = pages.get(tag(o, "content"));
      if (!page) problems.push(`${file}: override names record page ${tag(o, "content")}, which ${dir} does not define`);
      else if (tag(page, "sobjectType") !== tag(o, "pageOrSobjectType")) problems.push(`${file}: record page ${tag(o, "content")} is not a page of ${tag(o, "pageOrSobjectType")}`);
    }
  }

  const reportTypes = new Map();
  for (const file of filesIn(join(base, "reportTypes"), ".reportType-meta.xml")) {
    count("report types");
    const xml = readFileSync(file, "utf8");
    const object = tag(xml, "baseObject");
    if (!objects.has(object)) problems.push(`${file}: baseObject ${object} is not an object of ${dir}`);
    const columns = new Set();
    for (const column of blocks(xml, "columns")) {
      const field = tag(column, "field");
      const table = tag(column, "table");
      if (!hasField(table, field)) problems.push(`${file}: column ${table}.${field} does not exist`);
      columns.add(`${table}$${field}`);
    }
    reportTypes.set(`${basename(file, ".reportType-meta.xml")}__c`, columns);
  }

  const reportFolders = new Set(filesIn(join(base, "reports"), ".reportFolder-meta.xml").map((f) => basename(f, ".reportFolder-meta.xml")));
  const reports = new Set();
  for (const file of filesIn(join(base, "reports"), ".report-meta.xml")) {
    count("reports");
    const folder = basename(dirname(file));
    reports.add(`${folder}/${basename(file, ".report-meta.xml")}`);
    if (!reportFolders.has(folder)) problems.push(`${file}: report folder ${folder} has no ${folder}.reportFolder-meta.xml`);
    const xml = readFileSync(file, "utf8");
    const columns = reportTypes.get(tag(xml, "reportType"));
    if (!columns) { problems.push(`${file}: report type ${tag(xml, "reportType")} is not defined in ${dir}`); continue; }
    for (const field of [...all(xml, "field"), ...all(xml, "dateColumn"), ...all(xml, "groupingColumn")]) {
      if (!columns.has(field)) problems.push(`${file}: ${field} is not a column of report type ${tag(xml, "reportType")}`);
    }
  }

  const dashboardFolders = new Set(filesIn(join(base, "dashboards"), ".dashboardFolder-meta.xml").map((f) => basename(f, ".dashboardFolder-meta.xml")));
  for (const file of filesIn(join(base, "dashboards"), ".dashboard-meta.xml")) {
    count("dashboards");
    const folder = basename(dirname(file));
    if (!dashboardFolders.has(folder)) problems.push(`${file}: dashboard folder ${folder} has no ${folder}.dashboardFolder-meta.xml`);
    const xml = readFileSync(file, "utf8");
    for (const report of all(xml, "report")) {
      if (!reports.has(report)) problems.push(`${file}: report ${report} is not defined in ${dir}`);
    }
    if (tag(xml, "runningUser") === null && tag(xml, "dashboardType") !== "LoggedInUser") {
      problems.push(`${file}: no runningUser, so dashboardType must be LoggedInUser`);
    }
  }

  for (const file of filesIn(join(base, "permissionsets"), ".permissionset-meta.xml")) {
    count("permission sets");
    const xml = readFileSync(file, "utf8");
    for (const object of all(xml, "object")) {
      if (/__(c|e|mdt)$/.test(object) && !objects.has(object)) problems.push(`${file}: object ${object} is not defined in ${dir}`);
    }
    for (const field of all(xml, "field")) {
      const [object, name] = field.split(".");
      if (/__(c|e)$/.test(object) && objects.has(object) && !hasField(object, name)) problems.push(`${file}: field ${field} does not exist`);
    }
    for (const t of all(xml, "tab")) {
      if (/__c$/.test(t) && !tabs.has(t)) problems.push(`${file}: tab ${t} is not a tab of ${dir}`);
    }
    for (const c of all(xml, "apexClass")) {
      if (!classes.has(c)) problems.push(`${file}: class ${c} is not a class of ${dir}`);
    }
    for (const a of all(xml, "application")) {
      if (!apps.has(a)) problems.push(`${file}: app ${a} is not an app of ${dir}`);
    }
  }

  for (const file of filesIn(join(base, "platformEventChannelMembers"), ".platformEventChannelMember-meta.xml")) {
    count("change data capture selections");
    const xml = readFileSync(file, "utf8");
    const channel = tag(xml, "eventChannel");
    const entity = tag(xml, "selectedEntity") ?? "";
    if (channel !== "ChangeEvents") problems.push(`${file}: eventChannel ${channel} is not the standard ChangeEvents channel`);
    const object = entity.endsWith("__ChangeEvent") ? entity.slice(0, -"ChangeEvent".length) + "c" : null;
    if (!object || !objects.has(object)) problems.push(`${file}: selectedEntity ${entity} is not the change event of an object of ${dir}`);
    const want = `${channel}_${entity.replaceAll("__", "_")}`;
    if (basename(file, ".platformEventChannelMember-meta.xml") !== want) problems.push(`${file}: the file must be named ${want}.platformEventChannelMember-meta.xml`);
  }
}

for (const p of problems) console.error(p);
const kinds = Object.entries(checked).map(([k, n]) => `${n} ${k}`).join(", ");
console.log(`check-metadata: ${sources} Apex sources checked; ${kinds}; ${problems.length} problem(s)`);
process.exitCode = problems.length === 0 ? 0 : 1;
