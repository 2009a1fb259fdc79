// `npm start`: the demo service on embedded PGlite (./.slowcall/), dashboard in the browser. Installs from the lock
// first when node_modules is missing or stale (scripts/ensure-installed.mjs), so it works as the first command on a
// fresh clone. Arguments after `--` go to `slowcall serve --demo`.
import { spawnSync } from "node:child_process"
import { join, resolve } from "node:path"
import { ensureInstalled } from "./ensure-installed.mjs"

const root = resolve(import.meta.dirname, "..")
ensureInstalled()
const tsx = join(root, "node_modules", "tsx", "dist", "cli.mjs")
const result = spawnSync(
  process.execPath,
  [tsx, join(root, "packages/cli/src/bin.ts"), "serve", "--demo", ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: "inherit"
  }
)
process.exit(result.status ?? 1)
