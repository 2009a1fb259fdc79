import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"

// `npm run mutants` applies each known-bug mutant to a scratch copy and needs it killed; a patch that no longer
// applies (the code it edits was moved or rewritten) proves nothing there, and is found only by that long run. This
// checks, in seconds, that every patch still applies to the tree as it is, the way the script applies it
// (`patch -p1`), without changing a file (`--dry-run`).
const repo = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "..", "..")
const mutantsDir = path.join(repo, "packages", "simulator", "mutants")
const patches = fs
  .readdirSync(mutantsDir)
  .filter((file) => file.endsWith(".patch"))
  .sort()

describe("known-bug mutants", () => {
  it("are there", () => {
    expect(patches.length).toBeGreaterThan(0)
  })

  for (const file of patches) {
    it(`${file} applies to the current tree`, () => {
      const applied = spawnSync("patch", ["-p1", "--batch", "--dry-run", "--silent"], {
        cwd: repo,
        input: fs.readFileSync(path.join(mutantsDir, file), "utf8"),
        encoding: "utf8"
      })
      expect(applied.stdout + applied.stderr).toBe("")
      expect(applied.status).toBe(0)
    })
  }
})
