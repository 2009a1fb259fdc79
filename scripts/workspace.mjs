// The workspace's public packages and the manifests they ship with. One place for every packaging script
// (scripts/pack.mjs, scripts/size.mjs, the install test): a package is public when it sits under packages/, is listed
// in the root package.json's workspaces and is not `private`, so a new package is packed, checked and installed
// without editing any list. Only Node's own modules are used.
import { existsSync, readFileSync } from "node:fs"
import { basename, join, resolve } from "node:path"

export const root = resolve(import.meta.dirname, "..")

/** A packaging rule broken by a package's manifest: names the package and the field. */
export class ManifestError extends Error {
  constructor(pkg, message) {
    super(`${pkg}: ${message}`)
    this.name = "ManifestError"
  }
}

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"))

/**
 * Every public package of the workspace at `dir`, in the order of its workspaces list: `{ dir, name, version,
 * manifest }`, `dir` absolute.
 */
export const publicPackages = (dir = root) =>
  (readJson(join(dir, "package.json")).workspaces ?? [])
    .filter((w) => w.startsWith("packages/"))
    .map((w) => join(dir, w))
    .filter((d) => existsSync(join(d, "package.json")))
    .map((d) => ({ dir: d, manifest: readJson(join(d, "package.json")) }))
    .filter(({ manifest }) => manifest.private !== true)
    .map(({ dir: d, manifest }) => ({ dir: d, name: manifest.name, version: manifest.version, manifest }))

/** `./src/X.ts` becomes the built `./dist/X.js` (or `.d.ts` for types); anything else is left as it is. */
const built = (target, types) => {
  if (typeof target !== "string" || !target.startsWith("./src/")) return target
  return target.replace(/^\.\/src\//, "./dist/").replace(/\.ts$/, types ? ".d.ts" : ".js")
}

/** One `exports` entry, pointed at the build: `{ types, import, default }` for a source entry, null kept. */
const builtEntry = (entry) => {
  if (entry === null) return null
  const source = typeof entry === "string" ? entry : (entry.default ?? entry.import)
  if (typeof source !== "string" || !source.startsWith("./src/")) return entry
  return { types: built(source, true), import: built(source, false), default: built(source, false) }
}

const required = ["name", "version", "description", "license", "engines", "repository", "sideEffects", "files"]

/**
 * The package.json a public package ships with, from the one the workspace uses: `exports` (which point at `src/*.ts`
 * for the monorepo's dev loop) point at `dist/` with `types` + `import`/`default`, `main`/`types` name the root
 * entry's build, `publishConfig` fields replace their namesakes (the way pnpm and yarn apply them), and
 * `devDependencies`/`scripts` are dropped. Throws ManifestError when a required field is missing or a dependency on
 * a sibling package is not that sibling's exact version.
 */
export const publishManifest = (manifest, siblings) => {
  for (const field of required) {
    if (manifest[field] === undefined) throw new ManifestError(manifest.name ?? "?", `package.json has no "${field}"`)
  }
  const versions = new Map(siblings.map((s) => [s.name, s.version]))
  for (const kind of ["dependencies", "peerDependencies", "optionalDependencies"]) {
    for (const [dep, range] of Object.entries(manifest[kind] ?? {})) {
      if (versions.has(dep) && range !== versions.get(dep)) {
        throw new ManifestError(
          manifest.name,
          `${kind}.${dep} is "${range}", not the sibling's exact version "${versions.get(dep)}"`
        )
      }
    }
  }
  const { devDependencies: _dev, scripts: _scripts, publishConfig = {}, ...kept } = manifest
  const exports = Object.fromEntries(Object.entries(manifest.exports ?? {}).map(([k, v]) => [k, builtEntry(v)]))
  const rootEntry = exports["."]
  const out = { ...kept, exports }
  if (rootEntry !== null && typeof rootEntry === "object") {
    out.main = rootEntry.default
    out.types = rootEntry.types
  }
  const { access, registry, tag, provenance, ...overrides } = publishConfig
  Object.assign(out, overrides)
  const npmConfig = Object.fromEntries(
    Object.entries({ access, registry, tag, provenance }).filter(([, v]) => v !== undefined)
  )
  if (Object.keys(npmConfig).length > 0) out.publishConfig = npmConfig
  return out
}

/** The directory name a package is staged and packed under (`@slowcall/core` → `core`). */
export const shortName = (name) => basename(name)
