// Fails when modules import each other in a cycle, or when a package imports against the dependency direction
// of DESIGN.md section 6 (core depends on effect and Node built-ins only; nothing depends on http or cli but cli).
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")
const files = []
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) walk(p)
    else if (/\.(ts|mts|vue)$/.test(name) && !name.endsWith(".d.ts")) files.push(p)
  }
}
for (const pkg of readdirSync(join(root, "packages"))) {
  const src = join(root, "packages", pkg, "src")
  try {
    walk(src)
  } catch {
    // a package whose issue has not come yet has no src
  }
}

// Type-only imports are erased at run time, so they cannot form a load-order cycle and are not edges here.
const importRe = /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g
const graph = new Map()
const problems = []
const allowedPackages = {
  core: [],
  testing: ["core"],
  "adapter-postgres": ["core", "testing"],
  "adapter-redis": ["core", "testing"],
  "adapter-sqs": ["core", "testing"],
  simulator: ["core"],
  http: ["core", "adapter-postgres", "adapter-redis", "adapter-sqs"],
  cli: ["core", "http", "simulator", "adapter-postgres", "adapter-redis", "adapter-sqs"]
}
for (const file of files) {
  const text = readFileSync(file, "utf8")
  const pkg = relative(join(root, "packages"), file).split("/")[0]
  const edges = []
  for (const m of text.matchAll(importRe)) {
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

if (problems.length > 0) {
  for (const p of problems) console.error(p)
  process.exit(1)
}
console.log(`check-cycles: ${files.length} modules, no cycles, dependencies point down`)
