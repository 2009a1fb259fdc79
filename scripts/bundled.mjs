// Runs a TypeScript entry of this repository from a bundle of its workspace code, built with esbuild on the spot.
//
//   node [node flags] scripts/bundled.mjs <entry.ts> [arguments...]
//
// The entry sees `process.argv` as if it had been started directly, with the same arguments. Only the workspace's own
// sources (relative imports and `@slowcall/*`) go into the bundle; every other package is imported from node_modules
// as usual, so the code that runs is the same code `tsx` runs, compiled once.
//
// Why: `tsx` compiles with esbuild's keepNames, which wraps every named function (including the closures made per
// call) in a property definition. For the simulator that costs a measurable share of every run (see the simulator
// README's Speed section), so the commands that run many simulations (simulate, bench:sim, the mutant hunts) start
// from this bundle instead. Bundles are cached by content under the nearest node_modules/.cache/slowcall-bundles.
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { build } from "esbuild"

const [entryArg, ...rest] = process.argv.slice(2)
if (entryArg === undefined) {
  console.error("usage: node scripts/bundled.mjs <entry.ts> [arguments...]")
  process.exit(2)
}
const entry = path.resolve(entryArg)
if (!fs.existsSync(entry)) {
  console.error(`bundled: no such entry: ${entry}`)
  process.exit(2)
}

/** The nearest directory at or above `from` that has a node_modules directory: where the bundle's imports resolve. */
const rootOf = (from) => {
  for (let dir = path.dirname(from); ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, "node_modules"))) return dir
    if (path.dirname(dir) === dir) throw new Error(`no node_modules above ${from}`)
  }
}
const root = rootOf(entry)

/**
 * Bare imports other than the workspace's own packages stay imports of node_modules (and node: builtins). A workspace
 * module other than the entry that uses `import.meta` (to read a file beside its source, say) would see the bundle's
 * location instead of its own: such a bundle is refused rather than run wrong.
 */
const workspaceOnly = {
  name: "workspace-only",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith("@slowcall/") ? undefined : { path: args.path, external: true }
    )
    b.onLoad({ filter: /\.[cm]?[jt]s$/ }, (args) => {
      if (args.path === entry || args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined
      const source = fs.readFileSync(args.path, "utf8")
      if (source.includes("import.meta")) {
        return { errors: [{ text: `uses import.meta, which a bundle cannot keep: ${path.relative(root, args.path)}` }] }
      }
      // Handed to esbuild as read, so each source is read once.
      return { contents: source, loader: /\.[cm]?ts$/.test(args.path) ? "ts" : "js" }
    })
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
  // Stack traces name the TypeScript sources, as under tsx (source maps are turned on below).
  sourcemap: "inline",
  logLevel: "silent"
}).catch((error) => {
  console.error(`bundled: cannot bundle ${path.relative(root, entry)}: ${error.errors?.[0]?.text ?? error.message}`)
  process.exit(2)
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
process.setSourceMapsEnabled(true)
process.argv = [process.argv[0], file, ...rest]
await import(pathToFileURL(file).href)
