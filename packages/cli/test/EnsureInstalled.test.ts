/**
 * `scripts/ensure-installed.mjs` (run first by `npm start` and `npm test`): it tells a node_modules that matches the
 * lock from one that is missing or was installed from another lock, so the README's two commands install what they
 * need on a fresh clone and nothing on a current one. Small trees built here; the last case reads this repository's
 * own, which `npm test` just checked.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"

const { staleness } = (await import(new URL("../../../scripts/ensure-installed.mjs", import.meta.url).href)) as {
  readonly staleness: (dir?: string) => string | undefined
}
const made: Array<string> = []

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A tree with a lock naming `packages`, and (when given) npm's record of what node_modules holds. */
const tree = (packages: Record<string, object>, installed?: Record<string, object>): string => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-install-"))
  made.push(dir)
  writeFileSync(
    join(dir, "package-lock.json"),
    JSON.stringify({ lockfileVersion: 3, packages: { "": {}, ...packages } })
  )
  if (installed !== undefined) {
    mkdirSync(join(dir, "node_modules"))
    writeFileSync(join(dir, "node_modules", ".package-lock.json"), JSON.stringify({ packages: installed }))
  }
  return dir
}

describe("ensure-installed", () => {
  it("a tree without node_modules is stale", () => {
    expect(staleness(tree({ "node_modules/a": { version: "1.0.0" } }))).toBe("node_modules is not installed")
  })

  it("node_modules installed from the same lock is current, optional platform packages left out", () => {
    const dir = tree(
      { "node_modules/a": { version: "1.0.0" }, "node_modules/a-win32": { version: "1.0.0", optional: true } },
      { "node_modules/a": { version: "1.0.0" } }
    )
    expect(staleness(dir)).toBeUndefined()
  })

  it("a package missing, or at another version than the lock says, is stale", () => {
    const lock = { "node_modules/a": { version: "1.0.0" }, "node_modules/b": { version: "2.0.0" } }
    expect(staleness(tree(lock, { "node_modules/a": { version: "1.0.0" } }))).toBe("node_modules/b is not installed")
    expect(
      staleness(tree(lock, { "node_modules/a": { version: "1.0.1" }, "node_modules/b": { version: "2.0.0" } }))
    ).toBe("node_modules/a is at 1.0.1, the lock says 1.0.0")
  })

  it("a package at the lock's version but with another integrity hash is stale", () => {
    const lock = { "node_modules/a": { version: "1.0.0", integrity: "sha512-new" } }
    expect(staleness(tree(lock, { "node_modules/a": { version: "1.0.0", integrity: "sha512-old" } }))).toBe(
      "node_modules/a has another integrity hash than the lock's"
    )
    expect(staleness(tree(lock, { "node_modules/a": { version: "1.0.0", integrity: "sha512-new" } }))).toBeUndefined()
  })

  it("this repository's node_modules matches its lock", () => {
    expect(staleness()).toBeUndefined()
  })
})
