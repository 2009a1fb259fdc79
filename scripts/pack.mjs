// `npm run pack` / `npm run pack:check`: builds every public package (scripts/workspace.mjs) to ESM JS + .d.ts in its
// dist/, stages each one with the manifest it ships with (publishManifest: exports at dist/ instead of the src/ the
// monorepo runs), and packs each staged copy with `npm pack` into one directory of tarballs.
//
//   node scripts/pack.mjs [--out DIR] [--no-build] [--check]
//
// --check then runs publint and @arethetypeswrong/cli (ESM-only profile) on every package and fails when either
// reports a problem. Publish the tarballs (`npm publish DIR/slowcall-core-0.1.0.tgz`), not a package directory:
// `npm publish` in packages/X would ship the src/ exports.
import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { publicPackages, publishManifest, root, shortName } from "./workspace.mjs"

const run = (cmd, args, cwd) => {
  const result = spawnSync(cmd, args, { cwd, stdio: "inherit" })
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed in ${relative(root, cwd) || "."}`)
}

/** Copies the files under `from` that tsc does not emit (Lua scripts, HTML) to the same place under `to`. */
const copyAssets = (from, to) => {
  for (const name of readdirSync(from)) {
    const src = join(from, name)
    if (statSync(src).isDirectory()) copyAssets(src, join(to, name))
    else if (!name.endsWith(".ts")) {
      mkdirSync(to, { recursive: true })
      cpSync(src, join(to, name))
    }
  }
}

/** Builds every public package: `tsc -b` over each one's tsconfig.build.json, then the non-TypeScript assets. */
export const build = (packages = publicPackages()) => {
  const configs = packages.map((p) => {
    const config = join(p.dir, "tsconfig.build.json")
    if (!existsSync(config)) throw new Error(`${p.name}: no tsconfig.build.json`)
    return relative(root, config)
  })
  run(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-b", ...configs], root)
  for (const p of packages) copyAssets(join(p.dir, "src"), join(p.dir, "dist"))
}

/**
 * Stages and packs every public package into `out`; returns `[{ name, version, stage, tarball }]` (absolute paths).
 * The stage holds what `files` names plus the shipped package.json.
 */
export const pack = (out, packages = publicPackages()) => {
  rmSync(out, { recursive: true, force: true })
  mkdirSync(join(out, "stage"), { recursive: true })
  return packages.map((p) => {
    const stage = join(out, "stage", shortName(p.name))
    mkdirSync(stage, { recursive: true })
    const manifest = publishManifest(p.manifest, packages)
    for (const entry of manifest.files) {
      const src = join(p.dir, entry)
      if (!existsSync(src)) throw new Error(`${p.name}: files names ${entry}, which does not exist (built?)`)
      mkdirSync(dirname(join(stage, entry)), { recursive: true })
      cpSync(src, join(stage, entry), { recursive: true, filter: (f) => !f.endsWith(".tsbuildinfo") })
    }
    if (existsSync(join(root, "LICENSE")) && !existsSync(join(stage, "LICENSE"))) {
      cpSync(join(root, "LICENSE"), join(stage, "LICENSE"))
    }
    writeFileSync(join(stage, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`)
    const [info] = JSON.parse(
      execFileSync("npm", ["pack", "--json", "--pack-destination", out], {
        cwd: stage,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"]
      })
    )
    return { name: p.name, version: p.version, stage, tarball: join(out, info.filename) }
  })
}

/** publint and attw (ESM-only profile) on every packed package; returns the names that failed. */
export const check = (packed) => {
  const bin = (pkg, file) => join(root, "node_modules", pkg, file)
  const failed = []
  for (const p of packed) {
    console.log(`\n== ${p.name}`)
    const lint = spawnSync(process.execPath, [bin("publint", "src/cli.js"), "--strict", p.stage], { stdio: "inherit" })
    const types = spawnSync(
      process.execPath,
      [bin("@arethetypeswrong/cli", "dist/index.js"), "--profile", "esm-only", "--format", "ascii", p.tarball],
      { stdio: "inherit" }
    )
    if (lint.status !== 0 || types.status !== 0) failed.push(p.name)
  }
  return failed
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const args = process.argv.slice(2)
  const outAt = args.indexOf("--out")
  const out = resolve(outAt >= 0 ? args[outAt + 1] : join(root, ".scratch", "pack"))
  if (!args.includes("--no-build")) build()
  const packed = pack(out)
  for (const p of packed) console.log(`${p.name}@${p.version}: ${relative(root, p.tarball)}`)
  if (args.includes("--check")) {
    const failed = check(packed)
    if (failed.length > 0) {
      console.error(`\npack:check failed for ${failed.join(", ")}`)
      process.exit(1)
    }
    console.log(`\npack:check: ${packed.length} packages pass publint and attw`)
  }
}
