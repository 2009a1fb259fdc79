// Core and simulator read time through Effect's Clock and randomness through Random, so simulated runs replay
// bit for bit from their seed. This lint fails on the ambient sources of time and entropy in their src/.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")
const banned = [
  [/\bDate\.now\s*\(/, "Date.now()"],
  [/\bnew Date\(\s*\)/, "new Date()"],
  [/\bMath\.random\s*\(/, "Math.random()"],
  [/\bperformance\.now\s*\(/, "performance.now()"],
  [/\b(setTimeout|setInterval|setImmediate)\s*\(/, "timers"],
  [/\bprocess\.hrtime\b/, "process.hrtime"],
  [/\bcrypto\.randomUUID\b|\brandomUUID\s*\(|\brandomBytes\s*\(/, "crypto randomness"]
]
const problems = []
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) walk(p)
    else if (name.endsWith(".ts")) {
      const lines = readFileSync(p, "utf8").split("\n")
      lines.forEach((line, i) => {
        const code = line.replace(/\/\/.*$/, "")
        for (const [re, what] of banned) {
          if (re.test(code)) problems.push(`${relative(root, p)}:${i + 1}: ${what} (use Effect's Clock / Random)`)
        }
      })
    }
  }
}
for (const pkg of ["core", "simulator"]) walk(join(root, "packages", pkg, "src"))
if (problems.length > 0) {
  for (const p of problems) console.error(p)
  process.exit(1)
}
console.log("check-determinism: core and simulator src read time and randomness through Effect only")
