// Runs every example under examples/ (each one command, `npx tsx examples/<name>.ts`) and fails if any exits
// non-zero or runs longer than two minutes.
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { join, resolve } from "node:path"

const dir = resolve(import.meta.dirname, "..", "examples")
const examples = readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
let failed = 0
for (const file of examples.sort()) {
  console.log(`\n-- example ${file}`)
  const { status, signal } = spawnSync(process.execPath, ["--import", "tsx", join(dir, file)], {
    stdio: "inherit",
    timeout: 120_000,
    env: { ...process.env }
  })
  if (status !== 0) {
    failed += 1
    console.error(`example ${file} failed (exit ${status}${signal ? `, ${signal}` : ""})`)
  }
}
if (examples.length === 0) {
  console.error("no examples found")
  process.exit(1)
}
console.log(`\nexamples: ${examples.length - failed} of ${examples.length} ran`)
process.exit(failed === 0 ? 0 : 1)
