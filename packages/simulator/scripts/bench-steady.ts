/**
 * Instructions per steady-state simulated run, counted by valgrind's callgrind: `npm run bench:sim:callgrind`.
 *
 * Wall time on a shared machine spreads by more than most code changes, and callgrind counts instructions, not
 * seconds. But the first few hundred runs of a process are still the JIT's warm-up (in runs 40 to 80, half of the
 * instructions are TurboFan compiling), so this entry runs `warmup` runs uncounted, then switches callgrind's
 * instrumentation on for `measured` runs and off again: the figure is what the bench's trials see. Plans are the
 * bench's (seed 1, 20 jobs x 4 workers, every fault kind), 200 of them, taken in turn; with a `kind` (as `bench:sim
 * --by-kind` names them: `schedule`, `limits+batches`, `none`), the first 40 of that kind in the same draws.
 *
 * Run under `valgrind --tool=callgrind --instr-atstart=no` (scripts/bench-sim-callgrind.mjs does, and divides);
 * started without valgrind it refuses at once (exit 2) instead of running a count nobody takes.
 *
 * Usage: node scripts/bundled.mjs packages/simulator/scripts/bench-steady.ts [warmup=400] [measured=40] [kind]
 */
import { execFileSync } from "node:child_process"
import { faultKinds } from "@slowcall/simulator/Plan"
import { arbitraryFor, planOf, runAndCheck } from "@slowcall/simulator/Simulate"
import { benchPlans, parseKind } from "../src/internal/planKind.js"
import { mixSeed } from "../src/internal/prng.js"

if (!(process.env.LD_PRELOAD ?? "").includes("vgpreload")) {
  console.error("bench-steady: run it under valgrind's callgrind: npm run bench:sim:callgrind")
  process.exit(2)
}
const warmup = Number(process.argv[2] ?? 400)
const measured = Number(process.argv[3] ?? 40)
const kind = process.argv[4] === undefined ? undefined : parseKind(process.argv[4])
const runs = kind === undefined ? 200 : 40
const arbitrary = arbitraryFor({ seed: 1, runs: 200, jobs: 20, workers: 4, faults: faultKinds, allFaults: true })
const plans = benchPlans((i) => planOf(arbitrary, mixSeed(1, i)), runs, kind)
for (let i = 0; i < warmup; i++) runAndCheck(plans[i % runs]!)
execFileSync("callgrind_control", ["-i", "on", String(process.pid)], { stdio: "ignore" })
for (let i = 0; i < measured; i++) runAndCheck(plans[(warmup + i) % runs]!)
execFileSync("callgrind_control", ["-i", "off", String(process.pid)], { stdio: "ignore" })
