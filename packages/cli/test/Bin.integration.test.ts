/**
 * The `slowcall` executable runs built JavaScript and loads only what the command needs: no TypeScript loader for any
 * command; for `--help` and the HTTP client commands no server, adapter, driver or simulator; for `serve --memory`
 * the server but no adapter or driver. What a process loads is recorded by a resolve hook
 * (fixtures/record-imports.mjs). Timings are the benchmark's (bench/cli-startup.mjs), never asserted here.
 *
 * The bundle is rebuilt when a source it was built from changes (scripts/cli-bundle.mjs `freshBundle`), checked on a
 * small tree of its own.
 */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { bin, serve, stopAll } from "./processes.js"

const dir = mkdtempSync(join(tmpdir(), "slowcall-bin-"))
const preload = new URL("./fixtures/record-imports.mjs", import.meta.url).href
afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
})

let runs = 0
/** Runs `slowcall <args>` and returns its exit code and every module URL it resolved. */
const loads = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stderr: string; modules: ReadonlyArray<string> }>((resolve) => {
    const log = join(dir, `imports-${++runs}.txt`)
    writeFileSync(log, "")
    execFile(
      process.execPath,
      ["--import", preload, bin, ...args],
      { env: { ...process.env, NO_COLOR: "1", SLOWCALL_IMPORTS_LOG: log }, timeout: 90_000 },
      (error, _stdout, stderr) =>
        resolve({
          code: error ? ((error as { code?: number }).code ?? 1) : 0,
          stderr,
          modules: readFileSync(log, "utf8").split("\n").filter(Boolean)
        })
    )
  })

const packages = (modules: ReadonlyArray<string>) =>
  new Set(modules.flatMap((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? []))

/** Chunks of the bundle that hold the server, an adapter or the simulator. */
const heavyChunk =
  /\/(Serving|PgStore|PgDriver|PgMigrator|RedisStore|RedisConnection|SqsTransport|Simulate|Plan)-[A-Z0-9]+\.js$/

const drivers = ["@electric-sql/pglite", "pg", "ioredis", "@aws-sdk/client-sqs"]

describe("the slowcall executable", () => {
  let url: string
  beforeAll(async () => {
    url = (await serve(["--memory", "--port", "0"])).url
  })

  it("--help runs without a TypeScript loader and loads no server, adapter, driver or simulator", async () => {
    const { code, modules } = await loads(["--help"])
    expect(code).toBe(0)
    expect(packages(modules)).not.toContain("tsx")
    for (const driver of drivers) expect(packages(modules)).not.toContain(driver)
    expect(modules.filter((m) => heavyChunk.test(m) || m.endsWith(".ts"))).toEqual([])
  })

  it("jobs list against a running server loads no server, adapter, driver or simulator either", async () => {
    const { code, modules, stderr } = await loads(["jobs", "list", "--url", url])
    expect(code, stderr).toBe(0)
    expect(packages(modules)).not.toContain("tsx")
    for (const driver of drivers) expect(packages(modules)).not.toContain(driver)
    expect(modules.filter((m) => heavyChunk.test(m) || m.endsWith(".ts"))).toEqual([])
  })

  it("serve --memory loads the server but no adapter and no driver", async () => {
    const { code, modules } = await loads(["serve", "--memory", "--port", String(new URL(url).port)])
    // The port is taken by the server above: it fails after loading what it would serve with.
    expect(code).toBe(1)
    expect(modules.some((m) => /\/Serving-[A-Z0-9]+\.js$/.test(m))).toBe(true)
    for (const driver of drivers) expect(packages(modules)).not.toContain(driver)
    expect(modules.filter((m) => /\/(PgStore|RedisStore|SqsTransport)-/.test(m))).toEqual([])
  })
})

const { freshBundle } = (await import(new URL("../../../scripts/cli-bundle.mjs", import.meta.url).href)) as {
  readonly freshBundle: (root?: string) => string | undefined
}

describe("the bundle's freshness", () => {
  /** A checkout with one source and a bundle recorded as built from it. */
  const checkout = () => {
    const root = mkdtempSync(join(dir, "checkout-"))
    const source = join(root, "src.ts")
    writeFileSync(source, "export const a = 1\n")
    const cache = join(root, "node_modules", ".cache", "slowcall-cli")
    mkdirSync(join(cache, "b1"), { recursive: true })
    writeFileSync(join(cache, "b1", "bin.js"), "")
    const { mtimeMs, size } = statSync(source)
    writeFileSync(
      join(cache, "current.json"),
      JSON.stringify({ version: 1, dir: "b1", inputs: [["src.ts", mtimeMs, size]] })
    )
    return { root, source, bundle: join(cache, "b1", "bin.js") }
  }

  it("is fresh while every source it was built from is unchanged", () => {
    const { bundle, root } = checkout()
    expect(freshBundle(root)).toBe(bundle)
  })

  it("is stale once a source is edited or removed, or when nothing was built", () => {
    const edited = checkout()
    writeFileSync(edited.source, "export const a = 22\n")
    expect(freshBundle(edited.root)).toBeUndefined()
    const removed = checkout()
    rmSync(removed.source)
    expect(freshBundle(removed.root)).toBeUndefined()
    expect(freshBundle(mkdtempSync(join(dir, "empty-")))).toBeUndefined()
  })
})
