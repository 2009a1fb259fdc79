// Bundles a TypeScript entry of this repository with esbuild: only the workspace's own sources (relative imports and
// `@slowcall/*`) go into the bundle; every other package stays an import of node_modules, so the code that runs is the
// same code `tsx` runs, compiled once (without tsx's keepNames, which wraps every named function, including the
// closures made per call, in a property definition). Bundles are cached by content under the nearest
// node_modules/.cache/slowcall-bundles. Used by scripts/bundled.mjs (run an entry) and by bench/slowcall*.mjs (import
// the library as a user's build would ship it).
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { build } from "esbuild"

/** The nearest directory at or above `from` that has a node_modules directory: where the bundle's imports resolve. */
const rootOf = (from) => {
  for (let dir = path.dirname(from); ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, "node_modules"))) return dir
    if (path.dirname(dir) === dir) throw new Error(`no node_modules above ${from}`)
  }
}

/**
 * An esbuild `onLoad` callback for the workspace's own sources. A workspace module other than the entry that reads a
 * file beside its source through `import.meta.url` (migrations, Lua scripts, the dashboard's page) gets its own
 * source's URL in its place, so it reads the same file as under tsx; any other use of `import.meta` would see the
 * bundle's location instead of its own: such a bundle is refused rather than run wrong. Files under node_modules are
 * left to esbuild.
 */
export const workspaceSource = (root, entry) => (args) => {
  if (args.path === entry || args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined
  const source = fs
    .readFileSync(args.path, "utf8")
    .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href))
  if (source.includes("import.meta")) {
    return { errors: [{ text: `uses import.meta, which a bundle cannot keep: ${path.relative(root, args.path)}` }] }
  }
  // Handed to esbuild as read, so each source is read once.
  return { contents: source, loader: /\.[cm]?ts$/.test(args.path) ? "ts" : "js" }
}

/**
 * The path of a bundle of `entry` (an absolute path), built now unless a bundle of the same content exists. Throws
 * with esbuild's first error when the entry cannot be bundled.
 */
export const bundleOf = async (entry) => {
  const root = rootOf(entry)
  /** Bare imports other than the workspace's own packages stay imports of node_modules (and node: builtins). */
  const workspaceOnly = {
    name: "workspace-only",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) =>
        args.path.startsWith("@slowcall/") ? undefined : { path: args.path, external: true }
      )
      b.onLoad({ filter: /\.[cm]?[jt]s$/ }, workspaceSource(root, entry))
    }
  }
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    platform: "node",
    format: "esm",
    target: "node20",
    absWorkingDir: root,
    plugins: [workspaceOnly],
    // Stack traces name the TypeScript sources, as under tsx (source maps are turned on by the caller).
    sourcemap: "inline",
    logLevel: "silent"
  }).catch((error) => {
    throw new Error(`cannot bundle ${path.relative(root, entry)}: ${error.errors?.[0]?.text ?? error.message}`)
  })
  const code = result.outputFiles[0].contents
  const digest = createHash("sha256").update(code).digest("hex").slice(0, 16)
  const dir = path.join(root, "node_modules", ".cache", "slowcall-bundles")
  const file = path.join(dir, `${path.basename(entry).replace(/\.[cm]?ts$/, "")}-${digest}.mjs`)
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true })
    // Written whole under a private name, then renamed: a concurrent run never imports a half-written file.
    const partial = `${file}.${process.pid}.partial`
    fs.writeFileSync(partial, code)
    fs.renameSync(partial, file)
    // Bundles of the same entry (and leftovers of killed writers) older than an hour are no longer anyone's.
    const prefix = `${path.basename(file).replace(/-[0-9a-f]{16}\.mjs$/, "")}-`
    const hourAgo = Date.now() - 3_600_000
    for (const name of fs.readdirSync(dir)) {
      const old = path.join(dir, name)
      if (name.startsWith(prefix) && old !== file && fs.statSync(old).mtimeMs < hourAgo) fs.rmSync(old, { force: true })
    }
  }
  return file
}
