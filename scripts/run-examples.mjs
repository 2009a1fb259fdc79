// Runs every example under examples/ (each one command, `npx tsx examples/<name>.ts`) and fails if any exits
// non-zero or runs longer than two minutes. The Promise examples (promise-*.ts) run twice: on the machine's Postgres
// and, with EXAMPLE_BACKEND=redis, on its Redis (examples/lib/promiseDb.ts).
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { join, resolve } from "node:path"

const dir = resolve(import.meta.dirname, "..", "examples")
const examples = readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
const runs = examples.sort().flatMap((file) =>
  file.startsWith("promise-")
    ? [
        { file, backend: "postgres" },
        { file, backend: "redis" }
      ]
    : [{ file, backend: undefined }]
)
let failed = 0
for (const { file, backend } of runs) {
  const label = backend === undefined ? file : `${file} on ${backend}`
  console.log(`\n-- example ${label}`)
  const { status, signal } = spawnSync(process.execPath, ["--import", "tsx", join(dir, file)], {
    stdio: "inherit",
    timeout: 120_000,
    env: backend === undefined ? { ...process.env } : { ...process.env, EXAMPLE_BACKEND: backend }
  })
  if (status !== 0) {
    failed += 1
    console.error(`example ${label} failed (exit ${status}${signal ? `, ${signal}` : ""})`)
  }
}
if (examples.length === 0) {
  console.error("no examples found")
  process.exit(1)
}
console.log(`\nexamples: ${runs.length - failed} of ${runs.length} runs passed`)
process.exit(failed === 0 ? 0 : 1)
