// `npm run size:install`: what `npm install` puts on disk for the Promise API with the adapters a URL needs. Packs the
// workspace (scripts/pack.mjs) into a temporary folder, installs each set of tarballs into its own fresh project
// outside the repository (third-party dependencies from the registry), measures the production dependency tree, and
// writes the figures to docs/guide/install-size.json and the page that shows them, docs/guide/package-size.md.
//
//   node scripts/install-size.mjs [--no-build]
//
// examples/quick-starts.test.ts measures its own install the same way (`measure`) and checks the page's first row.
import { execFileSync, spawnSync } from "node:child_process"
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { root } from "./workspace.mjs"

export const dataPath = join(root, "docs", "guide", "install-size.json")

/** The sets measured: the Promise API with each adapter alone, then with all three (what it installed before they were optional). */
export const sets = [
  { adapters: ["@slowcall/adapter-postgres"], urls: "`postgres://`, `pglite:`" },
  { adapters: ["@slowcall/adapter-redis"], urls: "`redis://`" },
  {
    adapters: ["@slowcall/adapter-postgres", "@slowcall/adapter-redis", "@slowcall/adapter-sqs"],
    urls: "all, and `sqs`"
  }
]

/**
 * Bytes of the files under `dir`, and the disk they take in 4 KiB blocks with one block per directory (as `du` counts
 * on ext4), not counting a nested `node_modules` (its packages are counted on their own).
 */
const sizeOf = (dir, top = true) => {
  let bytes = 0
  let disk = 4096
  for (const name of readdirSync(dir)) {
    if (top && name === "node_modules") continue
    const path = join(dir, name)
    const stat = lstatSync(path)
    if (stat.isDirectory()) {
      const inner = sizeOf(path, false)
      bytes += inner.bytes
      disk += inner.disk
    } else {
      bytes += stat.size
      disk += Math.ceil(stat.size / 4096) * 4096
    }
  }
  return { bytes, disk }
}

/**
 * The production dependency tree of the project at `project` (what `npm ls --omit=dev --all` lists: devDependencies
 * such as tsx left out): `{ packages, bytes, disk }`, each package's own files counted once.
 */
export const measure = (project) => {
  const listed = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], { cwd: project, encoding: "utf8" })
  const dirs = [...new Set(listed.split("\n").filter((line) => line.trim() !== ""))].filter(
    (dir) => resolve(dir) !== resolve(project)
  )
  let bytes = 0
  let disk = 0
  for (const dir of dirs) {
    const size = sizeOf(dir)
    bytes += size.bytes
    disk += size.disk
  }
  return { packages: dirs.length, bytes, disk }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const { build, pack } = await import("./pack.mjs")
  const scratch = mkdtempSync(join(tmpdir(), "slowcall-install-size-"))
  try {
    if (!process.argv.includes("--no-build")) build()
    const packed = new Map(pack(join(scratch, "pack")).map((p) => [p.name, p.tarball]))
    const rows = []
    for (const [i, set] of sets.entries()) {
      const project = join(scratch, `project-${i}`)
      const names = ["@slowcall/core", "@slowcall/promise", ...set.adapters]
      mkdirSync(project)
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: "size", private: true, type: "module" }))
      const install = spawnSync("npm", ["install", "--no-audit", "--no-fund", ...names.map((n) => packed.get(n))], {
        cwd: project,
        stdio: "inherit",
        timeout: 300_000
      })
      if (install.status !== 0) throw new Error(`npm install failed for ${names.join(", ")}`)
      rows.push({ installed: names, urls: set.urls, ...measure(project) })
    }
    const data = {
      date: new Date().toISOString().slice(0, 10),
      command: "npm run size:install",
      node: process.version,
      npm: execFileSync("npm", ["--version"], { encoding: "utf8" }).trim(),
      rows
    }
    writeFileSync(dataPath, `${JSON.stringify(data, null, 2)}\n`)
    // In the repository's JSON style, so that `npm run lint` (biome ci) passes on the file as written.
    execFileSync(process.execPath, [
      join(root, "node_modules", "@biomejs", "biome", "bin", "biome"),
      "format",
      "--write",
      dataPath
    ])
    const size = await import("./size.mjs")
    writeFileSync(size.pagePath, await size.render())
    console.log(JSON.stringify(data, null, 2))
    console.log(`wrote ${relative(root, dataPath)} and ${relative(root, size.pagePath)}`)
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}
