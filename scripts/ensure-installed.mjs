// Makes sure node_modules matches package-lock.json before `npm start` or `npm test` run anything, so the README's two
// commands are the whole set-up on a fresh clone: with node_modules missing, or installed from another lock (a pull
// that changed dependencies), it runs `npm ci` first. Only Node's own modules are used here: nothing is installed yet.
//
// Stale means: npm's record of what it installed (node_modules/.package-lock.json) is missing, or a package the lock
// names (other than the optional, platform-specific ones npm skips) is absent from it, at another version, or
// installed with another integrity hash.
import { spawnSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")

/** Why `dir`'s node_modules does not match its lock, or undefined when it does. */
export const staleness = (dir = root) => {
  const installed = join(dir, "node_modules", ".package-lock.json")
  if (!existsSync(installed)) return "node_modules is not installed"
  const lock = JSON.parse(readFileSync(join(dir, "package-lock.json"), "utf8")).packages ?? {}
  const have = JSON.parse(readFileSync(installed, "utf8")).packages ?? {}
  for (const [path, entry] of Object.entries(lock)) {
    if (path === "" || entry.optional === true) continue
    if (have[path] === undefined) return `${path} is not installed`
    if (entry.version !== undefined && have[path].version !== entry.version) {
      return `${path} is at ${have[path].version}, the lock says ${entry.version}`
    }
    // Same version, other content (a tarball or git dependency re-resolved): the lock's hash tells.
    if (
      entry.integrity !== undefined &&
      have[path].integrity !== undefined &&
      have[path].integrity !== entry.integrity
    ) {
      return `${path} has another integrity hash than the lock's`
    }
  }
  return undefined
}

/** Runs `npm ci` when node_modules is stale; exits the process when that fails. */
export const ensureInstalled = () => {
  const why = staleness()
  if (why === undefined) return
  console.error(`${why}: installing from package-lock.json (npm ci)`)
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  const result = spawnSync(npm, ["ci", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) ensureInstalled()
