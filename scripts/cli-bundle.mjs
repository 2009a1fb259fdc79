// The `slowcall` command of the monorepo as built JavaScript: an esbuild bundle of packages/cli/src/bin.ts, rebuilt
// when a source it was built from has changed, so `npx slowcall` and `npm start` start in a fraction of a second
// instead of compiling TypeScript on every run, and never run a stale build after an edit.
//
//   node scripts/cli-bundle.mjs [--force]     # build now (when stale, or always with --force) and print the path
//
// What goes in: the workspace's sources and the packages they run on (effect, @effect/*), so Node parses one file
// instead of resolving a thousand modules. What stays out, imported from node_modules when a command needs it: the
// database and cloud drivers (PGlite with its WebAssembly files, pg, ioredis, the AWS SDK). Code split: the parts one
// command needs (the server, an adapter, the simulator) are chunks the command imports when it runs, so `--help` and
// `jobs list` load none of them.
//
// Fresh means: every workspace file the bundle was built from has the size and modification time it had then, and so
// have node_modules/.package-lock.json (an install) and this script and scripts/bundle.mjs. A build goes to a
// directory of its own under node_modules/.cache/slowcall-cli and is then named current (current.json, replaced by a
// rename), so two processes that build at once each run a whole build, never half of one. Only Node's own modules are
// imported up front; esbuild is loaded when a build is needed.
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

export const root = path.resolve(import.meta.dirname, "..")
const entry = path.join(root, "packages", "cli", "src", "bin.ts")
/** Where the builds of the checkout at `dir` live. */
const cacheOf = (dir) => path.join(dir, "node_modules", ".cache", "slowcall-cli")
const cacheDir = cacheOf(root)
const currentFile = path.join(cacheDir, "current.json")

/** Packages loaded from node_modules at run time, never bundled: drivers with files of their own, and the big SDKs. */
export const external = [
  "@electric-sql/pglite",
  "pg",
  "pg-native",
  "ioredis",
  "@aws-sdk/*",
  "@smithy/*",
  "esbuild",
  "tsx",
  // optional native add-ons some bundled packages try to load
  "bufferutil",
  "utf-8-validate",
  "msgpackr-extract"
]

/**
 * Imports of the Effect packages' index modules (`import { Effect, Layer } from "effect"`) as imports of each module
 * (`import * as Effect from "effect/Effect"`), which is what they mean. Why: an index re-exports every module of its
 * package, so with code splitting every module that any chunk uses would be reached from the entry through the index
 * and loaded by every command; imported one by one, a module loads only with the chunks that use it. A name the
 * package has no module of its own for is left as it was (the helpers of `effect/Function` are imported from there).
 */
const effectFunctions = new Set(["absurd", "flow", "hole", "identity", "pipe", "unsafeCoerce"])
const indexImport = /import\s*\{([^}]*)\}\s*from\s*"(effect|@effect\/platform|@effect\/cli|@effect\/platform-node)"/g

export const deepImports = (source) =>
  source.replace(indexImport, (whole, list, pkg) => {
    const lines = []
    const kept = []
    const types = []
    for (const raw of list.split(",")) {
      const specifier = raw.trim()
      if (specifier === "") continue
      if (specifier.startsWith("type ")) {
        types.push(specifier.slice("type ".length))
        continue
      }
      const [name, alias = name] = specifier.split(/\s+as\s+/)
      if (pkg === "effect" && effectFunctions.has(name)) lines.push(`import { ${specifier} } from "effect/Function"`)
      else if (fs.existsSync(path.join(root, "node_modules", pkg, "dist", "esm", `${name}.js`))) {
        lines.push(`import * as ${alias} from "${pkg}/${name}"`)
      } else kept.push(specifier)
    }
    if (kept.length > 0) lines.push(`import { ${kept.join(", ")} } from "${pkg}"`)
    // Erased whole: a kept `import { type X }` would still load the index under verbatimModuleSyntax.
    if (types.length > 0) lines.push(`import type { ${types.join(", ")} } from "${pkg}"`)
    // One line per original line break, so line numbers in stack traces stay where they were.
    return lines.join("; ") + "\n".repeat((whole.match(/\n/g) ?? []).length)
  })

/** Files whose change makes every bundle stale, besides the sources a bundle was built from. */
const alwaysWatched = () => [
  path.join(root, "node_modules", ".package-lock.json"),
  path.join(root, "scripts", "cli-bundle.mjs"),
  path.join(root, "scripts", "bundle.mjs")
]

const stamp = (file) => {
  try {
    const stat = fs.statSync(file)
    return [stat.mtimeMs, stat.size]
  } catch {
    return null
  }
}

/** The current bundle's entry file when it is fresh, or undefined (`dir`: the checkout, this one by default). */
export const freshBundle = (dir = root) => {
  let current
  try {
    current = JSON.parse(fs.readFileSync(path.join(cacheOf(dir), "current.json"), "utf8"))
  } catch {
    return undefined
  }
  if (current.version !== 1 || !Array.isArray(current.inputs) || typeof current.dir !== "string") return undefined
  for (const [file, mtimeMs, size] of current.inputs) {
    const now = stamp(path.join(dir, file))
    if (now === null || now[0] !== mtimeMs || now[1] !== size) return undefined
  }
  const file = path.join(cacheOf(dir), current.dir, "bin.js")
  return fs.existsSync(file) ? file : undefined
}

/**
 * Builds a new bundle and names it current; returns its entry file. Throws an Error whose message is esbuild's first
 * error (with its file and line) when the sources do not build.
 */
export const buildBundle = async () => {
  const [esbuild, { workspaceSource }] = await Promise.all([import("esbuild"), import("./bundle.mjs")])
  // Stamped before the build: a source saved while esbuild reads it leaves the bundle stale, never wrongly fresh.
  const watched = new Map(alwaysWatched().map((file) => [file, stamp(file)]))
  const dir = `b${Date.now().toString(36)}-${process.pid}`
  const outdir = path.join(cacheDir, dir)
  const result = await esbuild
    .build({
      entryPoints: { bin: entry },
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "node",
      target: "node20",
      outdir,
      absWorkingDir: root,
      external,
      metafile: true,
      // Maps beside the chunks: stack traces name the TypeScript sources under `node --enable-source-maps`.
      sourcemap: "linked",
      logLevel: "silent",
      // Bundled CommonJS packages call `require` for Node's own modules; an ES module has none of its own.
      banner: {
        js: 'import { createRequire as __slowcallRequire } from "node:module"; const require = __slowcallRequire(import.meta.url);'
      },
      plugins: [
        {
          name: "workspace-sources",
          setup: (b) =>
            b.onLoad({ filter: /\.[cm]?[jt]s$/ }, (args) => {
              const loaded =
                args.path === entry
                  ? { contents: fs.readFileSync(args.path, "utf8"), loader: "ts" }
                  : workspaceSource(root, entry)(args)
              return loaded === undefined ? undefined : { ...loaded, contents: deepImports(loaded.contents) }
            })
        }
      ]
    })
    .catch((error) => {
      const first = error.errors?.[0]
      const where = first?.location ? `${first.location.file}:${first.location.line}: ` : ""
      throw new Error(`cannot build the slowcall command: ${where}${first?.text ?? error.message}`)
    })
    .finally(() => {
      // esbuild's service process is not needed after the build: the command (a server, maybe) runs without it.
      esbuild.stop()
    })
  for (const input of Object.keys(result.metafile.inputs)) {
    const file = path.resolve(root, input)
    if (!file.includes(`${path.sep}node_modules${path.sep}`) && !watched.has(file)) watched.set(file, stamp(file))
  }
  const inputs = [...watched].map(([file, s]) => [path.relative(root, file), ...(s ?? [-1, -1])])
  const partial = `${currentFile}.${process.pid}.partial`
  fs.writeFileSync(partial, JSON.stringify({ version: 1, dir, inputs }))
  fs.renameSync(partial, currentFile)
  removeOldBuilds(dir)
  return path.join(outdir, "bin.js")
}

/** Builds other than `keep` older than an hour: no process started since then runs them. */
const removeOldBuilds = (keep) => {
  const hourAgo = Date.now() - 3_600_000
  for (const name of fs.readdirSync(cacheDir)) {
    const old = path.join(cacheDir, name)
    if (name === keep || name === "current.json") continue
    try {
      if (fs.statSync(old).mtimeMs < hourAgo) fs.rmSync(old, { recursive: true, force: true })
    } catch {
      // removed by another process meanwhile
    }
  }
}

/** The bundle's entry file: the current one when fresh, a new build otherwise. */
export const cliBundle = async () => freshBundle() ?? (await buildBundle())

/**
 * Runs the slowcall command with `args` in this process, as `slowcall <args>` would. A build failure prints one line
 * (`slowcall: cannot build ...`) and exits with 1.
 */
export const runCli = async (args) => {
  let file
  try {
    file = await cliBundle()
  } catch (error) {
    console.error(`slowcall: ${error.message.split("\n")[0]}`)
    process.exit(1)
  }
  process.argv = [process.argv[0], file, ...args]
  await import(pathToFileURL(file).href)
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const file = process.argv.includes("--force") ? await buildBundle() : await cliBundle()
  console.log(path.relative(root, file))
}
