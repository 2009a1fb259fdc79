/**
 * `npm run simulate` and `npm run bench:sim` run the simulator from a bundle of the workspace sources
 * (scripts/bundled.mjs) rather than through tsx. The bundle must be the same program: same report, same history hash,
 * same exit status, arguments passed through.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { faultKinds } from "../src/Plan.js"
import * as Simulate from "../src/Simulate.js"

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..")

const bundled = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [path.join(repo, "scripts", "bundled.mjs"), ...args],
      { cwd: repo, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
    )
  })

describe("the bundled simulator", () => {
  it("prints the report the in-process simulator computes, with the same history hash", async () => {
    const result = await bundled([
      "packages/simulator/scripts/simulate.ts",
      "--seed",
      "5",
      "--runs",
      "4",
      "--jobs",
      "6",
      "--workers",
      "2",
      "--json"
    ])
    expect(result.stderr).toBe("")
    const printed = JSON.parse(result.stdout) as { historyHash: string; runs: number; terminal: number }
    const inProcess = Simulate.simulate({ seed: 5, runs: 4, jobs: 6, workers: 2, faults: faultKinds })
    expect(printed.runs).toBe(4)
    expect(printed.historyHash).toBe(inProcess.historyHash)
    expect(printed.terminal).toBe(inProcess.terminal)
  })

  it("rejects bad arguments with the parser's message and exit status 1", async () => {
    const result = await bundled(["packages/simulator/scripts/simulate.ts", "--runs", "many"])
    expect(result.code).toBe(1)
    expect(result.stdout + result.stderr).toContain("'many' is not a integer")
  })

  it("runs a workspace module that reads files beside its source: import.meta.url names that source", async () => {
    // The full CLI serves a dashboard read from beside the HTTP package's source.
    const result = await bundled(["packages/cli/src/bin.ts", "--help"])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("serve")
  })

  it("refuses a bundle whose workspace module asks import.meta for anything else", async () => {
    const result = await bundled(["packages/simulator/test/fixtures/bundleEntry.ts"])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("uses import.meta")
  })

  it("refuses an entry that does not exist", async () => {
    const result = await bundled(["packages/simulator/scripts/no-such-entry.ts"])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("no such entry")
  })
})
