import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { Cause, Effect, Exit, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { AdapterNotInstalled, Backend, ConfigError } from "../src/index.js"
import * as Adapters from "../src/internal/adapters.js"

describe("Backend.parse", () => {
  it("names the store each URL scheme stands for", () => {
    expect(Backend.parse("postgres://u@h:5432/db")).toEqual({ _tag: "Postgres", url: "postgres://u@h:5432/db" })
    expect(Backend.parse("postgresql://h/db")._tag).toBe("Postgres")
    expect(Backend.parse("pglite:memory")).toEqual({ _tag: "Pglite", dataDir: undefined })
    expect(Backend.parse("pglite:")).toEqual({ _tag: "Pglite", dataDir: undefined })
    expect(Backend.parse("pglite:/var/lib/jobs")).toEqual({ _tag: "Pglite", dataDir: "/var/lib/jobs" })
    expect(Backend.parse("pglite:///var/lib/jobs")).toEqual({ _tag: "Pglite", dataDir: "/var/lib/jobs" })
    expect(Backend.parse("pglite:./data")).toEqual({ _tag: "Pglite", dataDir: "./data" })
    expect(Backend.parse("redis://127.0.0.1:6379")).toEqual({ _tag: "Redis", url: "redis://127.0.0.1:6379" })
    expect(Backend.parse("rediss://h:6380")._tag).toBe("Redis")
    expect(Backend.parse("memory:")).toEqual({ _tag: "Memory" })
  })

  it("refuses any other scheme with ConfigError, without echoing credentials", () => {
    let error: unknown
    try {
      Backend.parse("mysql://root:hunter2@db/x")
    } catch (caught) {
      error = caught
    }

    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).not.toContain("hunter2")
    expect((error as ConfigError).message).toContain("postgres://")
  })
})

describe("adapters are imported when a URL needs them", () => {
  const made: Array<string> = []
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true })
  })

  it("names the package to install when the adapter is not installed", async () => {
    const missing: Adapters.Adapter<unknown> = {
      packageName: "@slowcall/adapter-absent",
      // Not a literal, so the import is attempted at run time only (as an uninstalled peer is).
      load: () => import(["@slowcall", "adapter-absent"].join("/"))
    }

    const exit = await Effect.runPromiseExit(Adapters.load(missing, "absent:// URLs"))

    const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause).pipe(Option.getOrUndefined) : undefined
    expect(error).toBeInstanceOf(AdapterNotInstalled)
    expect(error?.message).toBe(
      "install @slowcall/adapter-absent to use absent:// URLs (npm install @slowcall/adapter-absent)"
    )
    expect(error?.packageName).toBe("@slowcall/adapter-absent")
    expect(error?.code).toBe("adapter_not_installed")
  })

  it("keeps any other failure to load an installed adapter as it is (a dependency of the adapter missing)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "slowcall-adapter-"))
    made.push(dir)
    const pkg = join(dir, "node_modules", "@slowcall", "adapter-broken")
    mkdirSync(pkg, { recursive: true })
    writeFileSync(join(pkg, "index.mjs"), 'import "slowcall-dependency-not-installed"\n')
    const broken: Adapters.Adapter<unknown> = {
      packageName: "@slowcall/adapter-broken",
      load: () => import(pathToFileURL(join(pkg, "index.mjs")).href)
    }

    const exit = await Effect.runPromiseExit(Adapters.load(broken, "broken:// URLs"))

    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    expect(String((defect as Error).message)).toContain("'slowcall-dependency-not-installed'")
  })

  it("loads each adapter the workspace has installed", async () => {
    const [pg, redis, sqs] = await Effect.runPromise(
      Effect.all([
        Adapters.load(Adapters.postgres, "postgres:// URLs"),
        Adapters.load(Adapters.redis, "redis:// URLs"),
        Adapters.load(Adapters.sqs, "the sqs option")
      ])
    )

    expect(typeof pg.PgStore.layerFromDriver).toBe("function")
    expect(typeof redis.RedisStore.layer).toBe("function")
    expect(typeof sqs.SqsTransport.layer).toBe("function")
  })
})
