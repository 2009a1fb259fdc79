// Core and simulator make no generator function and no class inside another function. Each such closure (an inline
// `Effect.gen(function* () { ... })`, a class expression) gets, once it is run or instantiated, a V8 hidden class of its
// own, allocated in the old generation, whose constructor slot points back at the closure. Until the next full
// collection, every young-generation collection then keeps the closure alive, and through its context everything it
// closes over: a worker, a client, a whole simulated run. The simulator measured it (its README's Speed section):
// every finished run stayed reachable through the next scavenge. Write the generator once, at module level, with
// `Effect.fnUntraced(function* (state, ...args) { ... })`, or use `flatMap` chains.
//
// This lint walks the TypeScript syntax tree of packages/core/src and packages/simulator/src and fails on every
// generator function or class whose nearest enclosing scope is a function.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import ts from "typescript"

const root = resolve(import.meta.dirname, "..")
/** Files whose nested generators run once per process, not per run or per job, with the reason. */
const allowed = new Map([
  ["packages/simulator/src/Command.ts", "the `simulate` command's handler runs once per CLI invocation"]
])

const isFunctionLike = (node) =>
  ts.isFunctionDeclaration(node) ||
  ts.isFunctionExpression(node) ||
  ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node)

/** The nearest enclosing function of `node`, or undefined when it sits at module level (or in a module-level class). */
const enclosingFunction = (node) => {
  for (let p = node.parent; p !== undefined; p = p.parent) {
    if (isFunctionLike(p)) return p
    if (ts.isClassDeclaration(p) || ts.isClassExpression(p)) {
      // A method belongs to its class: look at where the class itself is made.
      return enclosingFunction(p)
    }
  }
  return undefined
}

const problems = []
const check = (file) => {
  const rel = relative(root, file)
  if (allowed.has(rel)) return
  const text = readFileSync(file, "utf8")
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const visit = (node) => {
    const generator =
      (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isMethodDeclaration(node)) &&
      node.asteriskToken !== undefined
    const klass = ts.isClassDeclaration(node) || ts.isClassExpression(node)
    if ((generator || klass) && enclosingFunction(node) !== undefined) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source))
      problems.push(`${rel}:${line + 1}: ${generator ? "generator function" : "class"} made inside a function`)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
}
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) walk(p)
    else if (name.endsWith(".ts")) check(p)
  }
}
for (const pkg of ["core", "simulator"]) walk(join(root, "packages", pkg, "src"))
if (problems.length > 0) {
  for (const p of problems) console.error(p)
  console.error(
    "check-generators: write the generator once at module level (Effect.fnUntraced with the state as arguments)"
  )
  process.exit(1)
}
console.log("check-generators: core and simulator src make no generator function or class inside a function")
