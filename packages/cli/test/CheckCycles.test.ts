/**
 * `scripts/check-cycles.mjs` (run by `npm run lint`) on small workspace trees built here: it must fail on a package
 * cycle between workspace packages, however the back edge is made (an import by name from a script, a relative
 * import into the other package, a type-only import, a package.json entry), and pass the shapes the repository uses
 * on purpose (tests that run a package built on the one they test). The CLI depends on the simulator, and the
 * simulator's `simulate.ts` once imported the CLI: the first case is that cycle.
 */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"

const script = new URL("../../../scripts/check-cycles.mjs", import.meta.url).pathname
const made: Array<string> = []

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

interface Manifest {
  readonly dependencies?: Record<string, string>
  readonly devDependencies?: Record<string, string>
}

/**
 * A workspace with core, testing, simulator and cli as the repository has them (cli depends on the simulator, both
 * on core; testing on core), plus `files` (path -> source) and manifest changes.
 */
const tree = (options: {
  readonly files?: Record<string, string>
  readonly manifests?: Record<string, Manifest>
}): string => {
  const root = mkdtempSync(join(tmpdir(), "slowcall-cycles-"))
  made.push(root)
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  const packages: Record<string, Manifest> = {
    core: {},
    testing: { dependencies: { "@slowcall/core": "0.1.0" } },
    simulator: { dependencies: { "@slowcall/core": "0.1.0" } },
    cli: { dependencies: { "@slowcall/core": "0.1.0", "@slowcall/simulator": "0.1.0" } },
    ...options.manifests
  }
  write(
    "package.json",
    JSON.stringify({ name: "fixture", private: true, workspaces: Object.keys(packages).map((p) => `packages/${p}`) })
  )
  for (const [name, manifest] of Object.entries(packages)) {
    write(`packages/${name}/package.json`, JSON.stringify({ name: `@slowcall/${name}`, ...manifest }))
  }
  write("packages/core/src/Job.ts", 'import { Schema } from "effect"\nexport const Id = Schema.String\n')
  write("packages/testing/src/Suite.ts", 'import * as Job from "@slowcall/core/Job"\nexport const m = Job\n')
  write("packages/simulator/src/Simulate.ts", 'import * as Job from "@slowcall/core/Job"\nexport const m = Job\n')
  write("packages/cli/src/Simulate.ts", 'import * as Sim from "@slowcall/simulator/Simulate"\nexport const s = Sim\n')
  for (const [path, text] of Object.entries(options.files ?? {})) write(path, text)
  return root
}

const check = (root: string) =>
  new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [script, "--root", root], { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
    })
  })

describe("check-cycles: package cycles", () => {
  it("passes a workspace whose packages depend one way", async () => {
    // Arrange
    const root = tree({})
    // Act
    const result = await check(root)
    // Assert
    expect(result.stderr).toBe("")
    expect(result.status).toBe(0)
    expect(result.stdout).toContain("4 workspace packages, no package cycles")
  })

  it("fails when a simulator script imports the CLI by name (the cycle simulate.ts had)", async () => {
    // Arrange
    const root = tree({
      files: { "packages/simulator/scripts/simulate.ts": 'import { simulateCommand } from "@slowcall/cli/Simulate"\n' }
    })
    // Act
    const result = await check(root)
    // Assert
    expect(result.status).toBe(1)
    expect(result.stderr).toContain("package cycle: @slowcall/cli -> @slowcall/simulator -> @slowcall/cli")
    expect(result.stderr).toContain(
      "@slowcall/simulator -> @slowcall/cli: packages/simulator/scripts/simulate.ts imports @slowcall/cli/Simulate"
    )
    expect(result.stderr).toContain("@slowcall/cli -> @slowcall/simulator: packages/cli/src/Simulate.ts imports")
  })

  it("fails on a relative import into the other package's folder, and on a type-only import", async () => {
    // Arrange
    const relativeImport = tree({
      files: { "packages/simulator/scripts/run.ts": 'import { simulateCommand } from "../../cli/src/Simulate.js"\n' }
    })
    const typeImport = tree({
      files: {
        "packages/simulator/src/Types.ts": 'import type { s } from "@slowcall/cli/Simulate"\nexport type S = s\n'
      }
    })
    // Act
    const relativeResult = await check(relativeImport)
    const typeResult = await check(typeImport)
    // Assert
    expect(relativeResult.status).toBe(1)
    expect(relativeResult.stderr).toContain("packages/simulator/scripts/run.ts imports ../../cli/src/Simulate.js")
    expect(typeResult.status).toBe(1)
    expect(typeResult.stderr).toContain("packages/simulator/src/Types.ts imports @slowcall/cli/Simulate")
  })

  it("fails on a package.json entry that closes a cycle, a devDependency no test explains included", async () => {
    // Arrange
    const root = tree({
      manifests: {
        simulator: { dependencies: { "@slowcall/core": "0.1.0" }, devDependencies: { "@slowcall/cli": "0.1.0" } }
      }
    })
    // Act
    const result = await check(root)
    // Assert
    expect(result.status).toBe(1)
    expect(result.stderr).toContain(
      "@slowcall/simulator -> @slowcall/cli: packages/simulator/package.json lists @slowcall/cli in devDependencies"
    )
  })

  it("reports a longer cycle once, as one loop", async () => {
    // Arrange: core -> cli through a source import closes core -> cli -> simulator -> core.
    const root = tree({
      manifests: { cli: { dependencies: { "@slowcall/simulator": "0.1.0" } } },
      files: { "packages/core/src/Bad.ts": 'import { s } from "@slowcall/cli/Simulate"\nexport const b = s\n' }
    })
    // Act
    const result = await check(root)
    // Assert
    expect(result.status).toBe(1)
    const cycles = result.stderr.split("\n").filter((line) => line.startsWith("package cycle:"))
    expect(cycles).toEqual(["package cycle: @slowcall/cli -> @slowcall/simulator -> @slowcall/core -> @slowcall/cli"])
    // The direction rule (core depends on effect only) reports the same import on its own.
    expect(result.stderr).toContain("@slowcall/core may not depend on @slowcall/cli")
  })

  it("lets a test run a package built on the one it tests", async () => {
    // Arrange: core's tests run testing's suites, which depend on core; a devDependency only tests use is fine too.
    const root = tree({
      manifests: { core: { devDependencies: { "@slowcall/testing": "0.1.0" } } },
      files: {
        "packages/core/test/Conformance.test.ts": 'import * as Suite from "@slowcall/testing/Suite"\nSuite.m\n',
        "packages/core/test/support.ts": 'export * from "../../testing/src/Suite.js"\n'
      }
    })
    // Act
    const result = await check(root)
    // Assert
    expect(result.stderr).toBe("")
    expect(result.status).toBe(0)
  })
})

describe("check-cycles: modules", () => {
  it("still fails on an import cycle between two modules of one package", async () => {
    // Arrange
    const root = tree({
      files: {
        "packages/core/src/A.ts": 'import { b } from "./B.js"\nexport const a = () => b\n',
        "packages/core/src/B.ts": 'import { a } from "./A.js"\nexport const b = () => a\n'
      }
    })
    // Act
    const result = await check(root)
    // Assert
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(/import cycle: packages\/core\/src\/[AB]\.ts -> packages\/core\/src\/[AB]\.ts/)
  })
})
