// Fails when modules import each other in a cycle, when a package imports against the dependency direction of
// DESIGN.md section 6 (core depends on effect and Node built-ins only; nothing depends on http or cli but cli), or
// when workspace packages depend on each other in a cycle.
//
//   node scripts/check-cycles.mjs [--root DIR]
//
// Module cycles and directions are checked over each package's `src`. Package cycles are checked over what a
// package is made of and runs: the workspace packages its package.json names and the workspace packages its files
// import, by name (`@slowcall/x`, type-only imports too) or by a relative path into another package's folder, in
// src, scripts, bin, bench and anywhere else. Tests are the one exception: a test may use a package built on the
// one it tests (core's tests run `@slowcall/testing`'s conformance suites on the memory store), so imports from test
// files (a `test` folder, `*.test.ts`) are not edges, nor is a devDependency that only tests import. A script that
// `npm run` starts is not a test: the simulator's `simulate.ts` importing `@slowcall/cli` is a cycle.
// `--root` points the check at another tree (the CLI's tests build small ones).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"

const rootArg = process.argv.indexOf("--root")
const root = rootArg >= 0 ? resolve(process.argv[rootArg + 1] ?? ".") : resolve(import.meta.dirname, "..")
const problems = []

const codeFile = /\.(ts|mts|cts|tsx|js|mjs|cjs|vue)$/
const skippedDirs = new Set(["node_modules", "dist", "cache", ".scratch", "test-output"])
const walk = (dir, into) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) {
      if (!skippedDirs.has(name)) walk(p, into)
    } else if (codeFile.test(name) && !name.endsWith(".d.ts")) into.push(p)
  }
  return into
}

// Value imports and re-exports only: type-only imports are erased at run time, so they cannot form a load-order
// cycle between modules.
const valueImportRe = /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g
// Every import, type-only and side-effect ones too: a package that names another's types still needs it.
const anyImportRe =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|(?:^|\n)\s*import\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g

// ---------------------------------------------------------------------------------------------------------------
// Module cycles and dependency directions, over packages/*/src
// ---------------------------------------------------------------------------------------------------------------

const srcFiles = []
const packagesDir = join(root, "packages")
for (const pkg of existsSync(packagesDir) ? readdirSync(packagesDir) : []) {
  const src = join(packagesDir, pkg, "src")
  // a package whose issue has not come yet has no src
  if (existsSync(src)) walk(src, srcFiles)
}

const graph = new Map()
const allowedPackages = {
  core: [],
  testing: ["core"],
  "adapter-postgres": ["core", "testing"],
  "adapter-redis": ["core", "testing"],
  "adapter-sqs": ["core", "testing"],
  providers: ["core"],
  simulator: ["core", "schedules"],
  http: ["core", "adapter-postgres", "adapter-redis", "adapter-sqs", "schedules"],
  promise: ["core", "adapter-postgres", "adapter-redis", "adapter-sqs", "otel"],
  schedules: ["core", "adapter-postgres", "adapter-redis"],
  cli: ["core", "http", "simulator", "adapter-postgres", "adapter-redis", "adapter-sqs", "schedules"]
}
for (const file of srcFiles) {
  const text = readFileSync(file, "utf8")
  const pkg = relative(packagesDir, file).split(sep)[0]
  const edges = []
  for (const m of text.matchAll(valueImportRe)) {
    const spec = m[1] ?? m[2]
    if (spec.startsWith(".")) {
      edges.push(resolve(dirname(file), spec.replace(/\.js$/, ".ts")))
    } else if (spec.startsWith("@slowcall/")) {
      const target = spec.split("/")[1]
      if (target !== pkg && !(allowedPackages[pkg] ?? []).includes(target)) {
        problems.push(`${relative(root, file)} imports ${spec}: @slowcall/${pkg} may not depend on @slowcall/${target}`)
      }
    } else if (pkg === "core" && !spec.startsWith("effect") && !spec.startsWith("node:")) {
      problems.push(`${relative(root, file)} imports ${spec}: core depends on effect and Node built-ins only`)
    }
  }
  graph.set(file, edges)
}

const state = new Map()
const stack = []
const visit = (node) => {
  state.set(node, 1)
  stack.push(node)
  for (const next of graph.get(node) ?? []) {
    if (!graph.has(next)) continue
    if (state.get(next) === 1) {
      const cycle = stack.slice(stack.indexOf(next)).concat(next)
      problems.push(`import cycle: ${cycle.map((f) => relative(root, f)).join(" -> ")}`)
    } else if (!state.has(next)) visit(next)
  }
  stack.pop()
  state.set(node, 2)
}
for (const node of graph.keys()) if (!state.has(node)) visit(node)

// ---------------------------------------------------------------------------------------------------------------
// Package cycles, over every workspace package and everything in it
// ---------------------------------------------------------------------------------------------------------------

const rootManifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const workspaces = (rootManifest.workspaces ?? [])
  .map((dir) => ({ dir: resolve(root, dir), manifest: join(root, dir, "package.json") }))
  .filter((w) => existsSync(w.manifest))
  .map((w) => ({ ...w, name: JSON.parse(readFileSync(w.manifest, "utf8")).name }))
const byName = new Map(workspaces.map((w) => [w.name, w]))
/** The workspace package whose folder holds `path`, the innermost one when folders nest. */
const ownerOf = (path) => {
  let best
  for (const w of workspaces) {
    if ((path === w.dir || path.startsWith(w.dir + sep)) && (best === undefined || w.dir.length > best.dir.length)) {
      best = w
    }
  }
  return best
}

// name -> (dependency name -> why, the first reason found)
const packageEdges = new Map(workspaces.map((w) => [w.name, new Map()]))
const addEdge = (from, to, why) => {
  if (from === to || !byName.has(to)) return
  const edges = packageEdges.get(from)
  if (!edges.has(to)) edges.set(to, why)
}
const isTestFile = (w, file) =>
  /\.test\.[cm]?[jt]sx?$/.test(file) || relative(w.dir, file).split(sep).slice(0, -1).includes("test")
for (const w of workspaces) {
  // Which workspace packages this package's tests import: a devDependency on one of them is for the tests.
  const testedWith = new Set()
  for (const file of walk(w.dir, [])) {
    // A file inside a nested workspace package belongs to that package, not to this one.
    if (ownerOf(file) !== w) continue
    const test = isTestFile(w, file)
    const text = readFileSync(file, "utf8")
    for (const m of text.matchAll(anyImportRe)) {
      const spec = m[1] ?? m[2] ?? m[3]
      const target = spec.startsWith("@")
        ? spec.split("/").slice(0, 2).join("/")
        : spec.startsWith(".")
          ? ownerOf(resolve(dirname(file), spec))?.name
          : undefined
      if (target === undefined) continue
      if (test) testedWith.add(target)
      else addEdge(w.name, target, `${relative(root, file)} imports ${spec}`)
    }
  }
  const manifest = JSON.parse(readFileSync(w.manifest, "utf8"))
  for (const kind of ["dependencies", "peerDependencies", "optionalDependencies", "devDependencies"]) {
    for (const dep of Object.keys(manifest[kind] ?? {})) {
      if (kind === "devDependencies" && testedWith.has(dep) && !packageEdges.get(w.name).has(dep)) continue
      addEdge(w.name, dep, `${relative(root, w.manifest)} lists ${dep} in ${kind}`)
    }
  }
}

// Each strongly connected component of more than one package is one cycle to report (Tarjan).
const index = new Map()
const low = new Map()
const onStack = new Set()
const sccStack = []
const components = []
let counter = 0
const strongConnect = (node) => {
  index.set(node, counter)
  low.set(node, counter)
  counter++
  sccStack.push(node)
  onStack.add(node)
  for (const next of packageEdges.get(node).keys()) {
    if (!index.has(next)) {
      strongConnect(next)
      low.set(node, Math.min(low.get(node), low.get(next)))
    } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), index.get(next)))
  }
  if (low.get(node) === index.get(node)) {
    const component = []
    let member
    do {
      member = sccStack.pop()
      onStack.delete(member)
      component.push(member)
    } while (member !== node)
    if (component.length > 1) components.push(new Set(component))
  }
}
for (const name of [...packageEdges.keys()].sort()) if (!index.has(name)) strongConnect(name)

/** One concrete loop through the component, from its first member by name, as a list of edges. */
const loopIn = (component) => {
  const start = [...component].sort()[0]
  const path = [start]
  const seen = new Set([start])
  const search = (node) => {
    for (const next of [...packageEdges.get(node).keys()].sort()) {
      if (!component.has(next)) continue
      if (next === start) return true
      if (seen.has(next)) continue
      seen.add(next)
      path.push(next)
      if (search(next)) return true
      path.pop()
    }
    return false
  }
  search(start)
  return path.map((from, i) => [from, path[(i + 1) % path.length]])
}
for (const component of components) {
  const loop = loopIn(component)
  const because = loop.map(([from, to]) => `  ${from} -> ${to}: ${packageEdges.get(from).get(to)}`)
  const others = [...component].filter((name) => !loop.some(([from]) => from === name)).sort()
  const also = others.length === 0 ? "" : ` (${others.join(", ")} ${others.length === 1 ? "is" : "are"} in it too)`
  problems.push(
    `package cycle: ${loop.map(([from]) => from).join(" -> ")} -> ${loop[0][0]}${also}\n${because.join("\n")}`
  )
}

if (problems.length > 0) {
  for (const p of problems) console.error(p)
  process.exit(1)
}
console.log(
  `check-cycles: ${srcFiles.length} modules, no cycles, dependencies point down; ` +
    `${workspaces.length} workspace packages, no package cycles`
)
