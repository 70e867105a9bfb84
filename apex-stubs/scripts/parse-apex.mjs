#!/usr/bin/env node
// Parses every .cls and .trigger under the given directories (default:
// force-app) with @apexdevtools/apex-parser and exits non-zero, listing
// file:line:col: message, on any syntax error. The package's own check()
// exits 0 even on syntax errors, so errors are collected with an
// ApexErrorListener subclass attached to both the lexer and the parser.
//
// Before trusting itself it parses a deliberately broken snippet in memory
// and fails if no error is reported: a parser that cannot fail proves nothing.
//
//   node scripts/parse-apex.mjs [dir...]
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import {
  ApexErrorListener,
  ApexParserFactory,
} from "@apexdevtools/apex-parser";
import { walk } from "./files.mjs";

class CollectingListener extends ApexErrorListener {
  constructor() {
    super();
    this.errors = [];
  }
  apexSyntaxError(line, column, msg) {
    this.errors.push({ line, column, msg });
  }
}

/** Syntax errors of `source`, parsed as a trigger or a class unit. */
export function syntaxErrors(source, isTrigger) {
  const listener = new CollectingListener();
  const { parser } = ApexParserFactory.createLexerAndParser(source, listener);
  if (isTrigger) {
    parser.triggerUnit();
  } else {
    parser.compilationUnit();
  }
  return listener.errors;
}

function apexFiles(dir) {
  return walk(dir).filter((f) => f.endsWith(".cls") || f.endsWith(".trigger"));
}

function selfTest() {
  const broken = "public class Broken {\n  void run() {\n    Integer x = ;\n  }\n}\n";
  const brokenTrigger = "trigger T on Account (after insert) { if ( }";
  const good = "public class Fine { void run() { Integer x = 1; } }";
  if (syntaxErrors(broken, false).length === 0) {
    throw new Error("self-test: the broken class parsed without errors");
  }
  if (syntaxErrors(brokenTrigger, true).length === 0) {
    throw new Error("self-test: the broken trigger parsed without errors");
  }
  const fine = syntaxErrors(good, false);
  if (fine.length !== 0) {
    throw new Error(`self-test: a valid class reported ${fine.length} error(s)`);
  }
}

function main(dirs) {
  selfTest();
  const files = dirs.flatMap(apexFiles);
  if (files.length === 0) {
    console.error(`parse-apex: no .cls or .trigger files under ${dirs.join(", ")}`);
    return 1;
  }
  let failures = 0;
  for (const file of files) {
    const errors = syntaxErrors(readFileSync(file, "utf8"), file.endsWith(".trigger"));
    for (const e of errors) {
      const msg = e.msg.length > 200 ? `${e.msg.slice(0, 200)}…` : e.msg;
      console.error(`${relative(process.cwd(), file)}:${e.line}:${e.column}: ${msg}`);
    }
    if (errors.length > 0) failures++;
  }
  console.log(`parse-apex: ${files.length} files parsed, ${failures} with syntax errors (self-test ok)`);
  return failures === 0 ? 0 : 1;
}

const args = process.argv.slice(2);
process.exitCode = main(args.length > 0 ? args : ["force-app"]);
