/**
 * `scripts/check-engines.mjs` (run by `npm run lint`): no package the lock installs declares an `engines.node` that
 * excludes Node 20, so `npm ci` and `npm start` on Node 20 print no EBADENGINE warning. The lock before the
 * `overrides` pin held cookie 2.0.2 (through fauxqs, fastify and light-my-request), which requires Node 22.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"

const script = new URL("../../../scripts/check-engines.mjs", import.meta.url).pathname
const { excluded } = (await import(script)) as {
  readonly excluded: (
    lock: unknown,
    version: string
  ) => ReadonlyArray<{ readonly path: string; readonly version: string; readonly range: string }>
}
const lock = JSON.parse(readFileSync(new URL("../../../package-lock.json", import.meta.url), "utf8"))

describe("check-engines", () => {
  it("every package of this repository's lock runs on Node 20", () => {
    expect(excluded(lock, "20.20.0")).toEqual([])
    expect(excluded(lock, process.versions.node)).toEqual([])
  })

  it("names a package whose range excludes the version, and passes one whose range admits it", () => {
    const sample = {
      packages: {
        "": { engines: { node: ">=20" } },
        "node_modules/cookie": { version: "2.0.2", engines: { node: ">=22" } },
        "node_modules/undici": { version: "6.0.0", engines: { node: ">=20.18.1" } },
        "node_modules/old": { version: "1.0.0", engines: { node: "10.* || >= 12.*" } },
        "node_modules/none": { version: "1.0.0" }
      }
    }
    expect(excluded(sample, "20.20.0")).toEqual([{ path: "node_modules/cookie", version: "2.0.2", range: ">=22" }])
    expect(excluded(sample, "20.10.0").map((p) => p.path)).toEqual(["node_modules/cookie", "node_modules/undici"])
    expect(excluded(sample, "22.12.0")).toEqual([])
  })

  it("the script exits with 1 and one line per package on a lock that needs Node 22", () => {
    const dir = mkdtempSync(join(tmpdir(), "slowcall-engines-"))
    try {
      const file = join(dir, "package-lock.json")
      writeFileSync(
        file,
        JSON.stringify({ packages: { "node_modules/cookie": { version: "2.0.2", engines: { node: ">=22" } } } })
      )
      let status = 0
      let stderr = ""
      try {
        execFileSync(process.execPath, [script, "--lock", file, "--node", "20.20.0"], { stdio: "pipe" })
      } catch (error) {
        status = (error as { status: number }).status
        stderr = String((error as { stderr: Buffer }).stderr)
      }
      expect(status).toBe(1)
      expect(stderr).toContain("node_modules/cookie@2.0.2 requires node >=22, which excludes Node 20.20.0")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
