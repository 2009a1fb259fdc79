/**
 * `slowcall simulate` and the simulator's own `scripts/simulate.ts` (what `npm run simulate` bundles) are two entries
 * to one command: the script may not import the CLI (the CLI depends on the simulator), so it declares the same
 * flags itself. These runs hold the two to the same help, the same report, the same corpus files and the same exit
 * status for the same arguments.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname
const script = new URL("../../simulator/scripts/simulate.ts", import.meta.url).pathname
const corpus = new URL("../../simulator/corpus/", import.meta.url).pathname
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const dir = mkdtempSync(join(tmpdir(), "slowcall-simulate-"))

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (argv: ReadonlyArray<string>) =>
  new Promise<Run>((resolve, reject) => {
    const child = spawn(process.execPath, argv, { env: { ...process.env, NO_COLOR: "1" } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** The same arguments through `slowcall simulate` and through the script, at the same time. */
const both = (args: ReadonlyArray<string>) =>
  Promise.all([run([bin, "simulate", ...args]), run(["--import", tsx, script, ...args])])

describe("slowcall simulate and scripts/simulate.ts", () => {
  it("print the same help", async () => {
    // Act
    const [cli, scripted] = await both(["--help"])
    // Assert
    expect(cli.code).toBe(0)
    expect(scripted).toEqual(cli)
    for (const flag of ["--seed", "--runs", "--jobs", "--workers", "--faults", "--all-faults", "--json", "--replay"]) {
      expect(cli.stdout).toContain(flag)
    }
  }, 60_000)

  it("print the same report and exit the same way for a run set", async () => {
    // Act
    const [cli, scripted] = await both(["--seed", "3", "--runs", "4", "--jobs", "6", "--workers", "2", "--json"])
    // Assert
    expect(scripted).toEqual(cli)
    const report = JSON.parse(cli.stdout)
    expect(report).toMatchObject({ seed: 3, runs: 4, jobs: 6, workers: 2 })
    expect(cli.code).toBe(report.violations.length === 0 ? 0 : 1)
  }, 120_000)

  it("replay a saved plan the same way and write the same corpus files", async () => {
    // Arrange
    const entry = readdirSync(corpus).find((name) => name.endsWith(".json"))!
    const [intoCli, intoScript] = [join(dir, "cli"), join(dir, "script")]
    // Act
    const [cli, scripted] = await Promise.all([
      run([bin, "simulate", "--replay", join(corpus, entry), "--save-corpus", intoCli]),
      run(["--import", tsx, script, "--replay", join(corpus, entry), "--save-corpus", intoScript])
    ])
    // Assert
    expect(scripted).toEqual(cli)
    expect(cli.stdout.length).toBeGreaterThan(0)
    const files = (at: string) => {
      try {
        return readdirSync(at).map((name) => [name, readFileSync(join(at, name), "utf8")])
      } catch {
        return []
      }
    }
    expect(files(intoScript)).toEqual(files(intoCli))
  }, 120_000)

  it("refuse an unknown fault kind, an unreadable plan and a file that is no plan with the same one line", async () => {
    // Arrange
    const [missing, garbled, planless] = ["no-such-plan.json", "garbled.json", "planless.json"].map((f) => join(dir, f))
    writeFileSync(garbled!, "{ not json")
    writeFileSync(planless!, JSON.stringify({ invariants: ["I1"] }))
    // Act
    const [cli, scripted] = await both(["--faults", "F5,F99"])
    const [cliMissing, scriptedMissing] = await both(["--replay", missing!])
    const [cliGarbled, scriptedGarbled] = await both(["--replay", garbled!])
    const [cliPlanless, scriptedPlanless] = await both(["--replay", planless!])
    // Assert
    expect(cli.code).toBe(1)
    expect(cli.stderr.trim()).toMatch(/^slowcall: unknown fault F99; known: F1,/)
    expect(scripted).toEqual(cli)
    expect(cliMissing).toMatchObject({ code: 1, stdout: "", stderr: `slowcall: cannot read ${missing}\n` })
    expect(scriptedMissing).toEqual(cliMissing)
    for (const [file, run] of [
      [garbled, cliGarbled],
      [planless, cliPlanless]
    ] as const) {
      expect(run).toMatchObject({
        code: 1,
        stdout: "",
        stderr: `slowcall: ${file} is not a saved plan (a corpus entry with a plan)\n`
      })
    }
    expect(scriptedGarbled).toEqual(cliGarbled)
    expect(scriptedPlanless).toEqual(cliPlanless)
  }, 120_000)
})
