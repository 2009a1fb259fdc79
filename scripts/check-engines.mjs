// Fails when a package in package-lock.json declares an `engines.node` range that excludes a Node version this
// repository runs on: what `npm ci` and `npm start` would warn about as EBADENGINE (and what may break at run time).
// Every package of the lock counts, test-only ones included, since `npm ci` installs them all.
//
//   node scripts/check-engines.mjs [--lock FILE] [--node VERSION]...
//
// Checked against the running Node and each `--node` version (lint passes 20.20.0, so a run on Node 22 or 24 still
// checks the oldest line the project supports). A package pulled in at a version that wants a newer Node is pinned
// to one that does not with `overrides` in the root package.json (light-my-request, through fauxqs and fastify, is
// one: its 6.8 line requires cookie 2, which wants Node 22).
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import semver from "semver"

/** The lock's packages whose `engines.node` excludes `version`: `[{ path, version, range }]`. */
export const excluded = (lock, version) => {
  const out = []
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    const range = entry.engines?.node
    if (path === "" || typeof range !== "string") continue
    if (!semver.satisfies(version, range, { includePrerelease: true })) {
      out.push({ path, version: entry.version, range })
    }
  }
  return out
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const args = process.argv.slice(2)
  const lockAt = args.indexOf("--lock")
  const lockFile = resolve(lockAt >= 0 ? args[lockAt + 1] : resolve(import.meta.dirname, "..", "package-lock.json"))
  const versions = [process.versions.node, ...args.flatMap((arg, i) => (args[i - 1] === "--node" ? [arg] : []))]
  const lock = JSON.parse(readFileSync(lockFile, "utf8"))
  let problems = 0
  for (const version of new Set(versions)) {
    for (const p of excluded(lock, version)) {
      problems += 1
      console.error(`check-engines: ${p.path}@${p.version} requires node ${p.range}, which excludes Node ${version}`)
    }
  }
  if (problems > 0) process.exit(1)
  console.log(`check-engines: every package in the lock runs on Node ${[...new Set(versions)].join(" and ")}`)
}
