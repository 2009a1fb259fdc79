import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import type { CorpusEntry } from "../src/Report.js"
import * as Simulate from "../src/Simulate.js"

const dir = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "corpus")
const entries = fs
  .readdirSync(dir)
  .filter((file) => file.endsWith(".json"))
  .sort()

describe("regression corpus", () => {
  it("holds saved plans", () => {
    expect(entries.length).toBeGreaterThan(0)
  })

  for (const file of entries) {
    it(`replays ${file} with every invariant holding`, () => {
      const entry = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8")) as CorpusEntry
      const report = Simulate.replayPlan(entry.plan)
      expect(report.violations).toEqual([])
      expect(report.lost).toBe(0)
      expect(report.determinism).toBe("ok")
    })
  }
})
