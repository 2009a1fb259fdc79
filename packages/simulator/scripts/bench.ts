/**
 * `npm run bench:sim`: full simulated runs per second for 20 jobs x 4 workers with every fault kind on.
 * Usage: npm run bench:sim [-- --runs 200 --seed 1]
 */
import { faultKinds } from "@slowcall/simulator/Plan"
import { arbitraryFor, planOf, runAndCheck } from "@slowcall/simulator/Simulate"
import { mixSeed } from "../src/internal/prng.js"

const args = process.argv.slice(2)
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
const runs = flag("runs", 200)
const seed = flag("seed", 1)
const options = { seed, runs, jobs: 20, workers: 4, faults: faultKinds, allFaults: true }
const arbitrary = arbitraryFor(options)
const plans = Array.from({ length: runs }, (_, i) => planOf(arbitrary, mixSeed(seed, i)))

// Warm up the JIT on a few runs that are not counted.
for (const plan of plans.slice(0, 5)) runAndCheck(plan)

let steps = 0
let events = 0
let violations = 0
const started = performance.now()
const cpuStarted = process.cpuUsage()
for (const plan of plans) {
  const { run, verdict } = runAndCheck(plan)
  steps += run.steps
  events += run.events.length
  violations += verdict.violations.length
}
const seconds = (performance.now() - started) / 1000
const cpu = process.cpuUsage(cpuStarted)
const cpuSeconds = (cpu.user + cpu.system) / 1e6
console.log(`simulated runs: ${runs} (20 jobs x 4 workers, all ${faultKinds.length} fault kinds on)`)
console.log(`wall time: ${seconds.toFixed(2)} s`)
console.log(`runs/s: ${(runs / seconds).toFixed(1)}   (target >= 100)`)
// On a shared machine the wall clock also counts time other processes took: CPU time is this process's own.
console.log(`cpu time: ${cpuSeconds.toFixed(2)} s, runs per cpu-second: ${(runs / cpuSeconds).toFixed(1)}`)
console.log(`heap after the runs: ${(process.memoryUsage().heapUsed / 1e6).toFixed(0)} MB`)
console.log(`scheduler steps/run: ${Math.round(steps / runs)}, history events/run: ${Math.round(events / runs)}`)
console.log(`violations: ${violations}`)
