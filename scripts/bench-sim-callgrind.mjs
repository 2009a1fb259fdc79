// `npm run bench:sim:callgrind [-- warmup measured [kind]]`: instructions per steady-state simulated run, under valgrind's
// callgrind (see packages/simulator/scripts/bench-steady.ts). Needs valgrind (Debian: apt-get install valgrind).
// Counts instructions, so the figure does not depend on what else the machine runs; the same code measured twice
// has differed by about 3% (the JIT's and the collector's choices vary a little).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

// A kind (`schedule`, `limits+batches`, `none`, ... as `bench:sim --by-kind` names them) counts the plans of that kind.
const [warmup = "400", measured = "40", ...kind] = process.argv.slice(2)
const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "slowcall-callgrind-")), "callgrind.out")
const run = spawnSync(
  "valgrind",
  [
    "--tool=callgrind",
    "--instr-atstart=no",
    `--callgrind-out-file=${out}`,
    process.execPath,
    "--max-semi-space-size=64",
    "--no-allocation-site-pretenuring",
    "--single-threaded",
    "scripts/bundled.mjs",
    "packages/simulator/scripts/bench-steady.ts",
    warmup,
    measured,
    ...kind
  ],
  { encoding: "utf8", stdio: ["ignore", "inherit", "pipe"] }
)
if (run.error !== undefined) {
  console.error(`bench:sim:callgrind: could not start valgrind (${run.error.message})`)
  process.exit(2)
}
const collected = /Collected\s*:\s*([\d,]+)/.exec(run.stderr ?? "")
if (run.status !== 0 || collected === null) {
  console.error(`bench:sim:callgrind: valgrind exited ${run.status}\n${(run.stderr ?? "").slice(-2000)}`)
  process.exit(1)
}
const total = Number(collected[1].replaceAll(",", ""))
console.log(
  `warm-up runs (uncounted): ${warmup}, counted runs: ${measured}${kind.length > 0 ? `, plans of kind ${kind[0]}` : ""}`
)
console.log(`instructions per steady-state run: ${(total / Number(measured) / 1e6).toFixed(1)} million`)
console.log(`callgrind profile: ${out}`)
