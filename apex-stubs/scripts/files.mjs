// Shared by the offline checks: the files below a directory.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** Every file below `dir`, sorted by name at each level; node_modules and
 * directories whose name starts with "." are skipped. */
export function walk(dir) {
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
