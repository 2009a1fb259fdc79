/**
 * The `slowcall` executable, run as a user runs it (`packages/cli/bin/slowcall.mjs`), against a live server on the
 * memory store and against PGlite, the Postgres server and Redis for `migrate`.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Effect, Layer } from "effect"
import { DATABASE_URL, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { failJob, post } from "../../http/test/contract.js"
import { type Running, start } from "../../http/test/harness.js"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname

const slowcall = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, NO_COLOR: "1", ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      }
    )
  })

describe("slowcall jobs and dlq against a running server", () => {
  let server: Running
  let url: string
  beforeAll(async () => {
    server = await start(Layer.merge(Store.layerMemory, Transport.layerMemory()), { queue: "cli" })
    url = server.url
  })
  afterAll(async () => {
    await server?.close()
  })
  const submit = async (input: unknown) =>
    (await (await post(url, "/v1/jobs", { type: "test.work", input })).json()) as any

  it("jobs get prints the job, and --json prints the API's view", async () => {
    const job = await submit({ text: "get me" })
    const text = await slowcall(["jobs", "get", job.id, "--url", url])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain(`id           ${job.id}`)
    expect(text.stdout).toMatch(/state\s+queued/)
    const json = await slowcall(["jobs", "get", job.id, "--json", "--url", url])
    expect(json.code, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({ id: job.id, state: "queued", type: "test.work" })
  })

  it("jobs list and jobs cancel", async () => {
    const job = await submit({ text: "cancel me" })
    const list = await slowcall(["jobs", "list", "--state", "queued", "--json", "--url", url])
    expect(list.code, list.stderr).toBe(0)
    expect(JSON.parse(list.stdout).map((j: any) => j.id)).toContain(job.id)
    const table = await slowcall(["jobs", "list", "--url", url])
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+TYPE\s+STATE/)
    const cancel = await slowcall(["jobs", "cancel", job.id, "--url", url])
    expect(cancel.code, cancel.stderr).toBe(0)
    expect(cancel.stdout.trim()).toBe(`cancelled ${job.id}`)
    const again = await slowcall(["jobs", "cancel", job.id, "--url", url])
    expect(again.code).not.toBe(0)
    expect(again.stderr.trim().split("\n")).toHaveLength(1)
    expect(again.stderr).toContain("already_terminal")
  })

  it("errors are one line on stderr with a non-zero exit", async () => {
    const missing = await slowcall(["jobs", "get", "01900000-0000-7000-8000-000000000000", "--url", url])
    expect(missing.code).not.toBe(0)
    expect(missing.stdout).toBe("")
    expect(missing.stderr.trim()).toMatch(/^slowcall: GET \/v1\/jobs\/\S+ failed: not_found$/)
    const down = await slowcall(["jobs", "list", "--url", "http://127.0.0.1:9"])
    expect(down.code).not.toBe(0)
    expect(down.stderr.trim()).toBe(
      "slowcall: cannot reach the slowcall server at http://127.0.0.1:9 (is `slowcall serve` running?)"
    )
  })

  it("dlq list groups dead letters; dlq replay replays them in batches with progress", async () => {
    const jobs = await Promise.all([1, 2, 3, 4, 5].map(() => submit({ text: "poison" })))
    for (const job of jobs) await server.run(failJob(job.id, "auth", 1))
    const list = await slowcall(["dlq", "list", "--error-class", "auth", "--url", url])
    expect(list.code, list.stderr).toBe(0)
    expect(list.stdout).toMatch(/^auth\s+[0-9a-f]{16}\s+5\s+5¢$/m)
    const json = await slowcall(["dlq", "list", "--json", "--url", url])
    expect(JSON.parse(json.stdout).groups[0]).toMatchObject({ errorClass: "auth", count: 5 })

    const replay = await slowcall(["dlq", "replay", "--error-class", "auth", "--batch", "2", "--url", url])
    expect(replay.code, replay.stderr).toBe(0)
    expect(replay.stdout.trim()).toBe("replayed 5 dead letters, skipped 0")
    // Three batches of at most two, each drawn as a progress bar.
    expect(replay.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^\[#+\.*\] 2\/5 replayed 2, skipped 0$/),
      expect.stringMatching(/^\[#+\.*\] 4\/5 replayed 4, skipped 0$/),
      expect.stringMatching(/^\[#{30}\] 5\/5 replayed 5, skipped 0$/)
    ])
    const states = await server.run(
      Effect.flatMap(Query.Query, (query) =>
        Effect.forEach(jobs, (job) => Effect.map(query.get({ jobId: job.id as JobId }), (j) => j.state))
      )
    )
    expect(states).toEqual(["queued", "queued", "queued", "queued", "queued"])
    const none = await slowcall(["dlq", "replay", "--id", jobs[0].id, "--json", "--url", url])
    expect(JSON.parse(none.stdout)).toEqual({ replayed: 0, skipped: 1 })
  })

  it("conventions: no colour when piped, one prefixed error line for every kind of failure", async () => {
    // Piped and without NO_COLOR: still no escape sequences, in help as in errors.
    const help = await slowcall(["advise", "--help"], { NO_COLOR: "" })
    expect(help.code, help.stderr).toBe(0)
    expect(help.stdout).toContain("--hop")
    expect(help.stdout).not.toContain("\u001b[")
    expect(help.stdout).toMatch(/--hop text 1\+[\s\S]*required: a hop[\s\S]*must be repeated at least 1 times/)
    const failures: Array<[ReadonlyArray<string>, RegExp]> = [
      [["advise", "--p99", "45s"], /^slowcall: Expected at least 1 value\(s\) for option: '--hop'$/],
      [["advise", "--p99", "fast", "--hop", "lb=60s"], /^slowcall: --p99: "fast" is not a duration/],
      [["jobs", "list", "--state", "bogus", "--url", url], /^slowcall: Expected one of the following cases: queued/],
      [["jobs", "get"], /^slowcall: Missing argument <job-id>$/],
      [["nosuch"], /^slowcall: Invalid subcommand for slowcall/]
    ]
    const results = await Promise.all(failures.map(([args]) => slowcall(args, { NO_COLOR: "" })))
    failures.forEach(([args, line], i) => {
      const result = results[i]!
      expect(result.code, args.join(" ")).toBe(1)
      expect(result.stdout, args.join(" ")).toBe("")
      expect(result.stderr.trimEnd().split("\n"), args.join(" ")).toEqual([expect.stringMatching(line)])
      expect(result.stderr).not.toContain("\u001b[")
    })
  })

  it("usage errors exit non-zero", async () => {
    const bad = await slowcall(["jobs", "list", "--state", "bogus", "--url", url])
    expect(bad.code).not.toBe(0)
    const help = await slowcall(["--help"])
    expect(help.code, help.stderr).toBe(0)
    for (const name of ["serve", "migrate", "jobs", "dlq", "advise", "simulate"]) expect(help.stdout).toContain(name)
  })
})

describe("slowcall migrate", () => {
  const schema = uniqueSchema("cli_migrate")
  const dir = mkdtempSync(join(tmpdir(), "slowcall-cli-"))
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true })
    await dropSchema(schema)
  })

  it("creates the schema in embedded PGlite, then reports it up to date", async () => {
    const first = await slowcall(["migrate", "--data-dir", join(dir, "db"), "--json"])
    expect(first.code, first.stderr).toBe(0)
    const result = JSON.parse(first.stdout)
    expect(result.schema).toBe("slowcall")
    expect(result.applied.length).toBeGreaterThan(0)
    const second = await slowcall(["migrate", "--data-dir", join(dir, "db")])
    expect(second.stdout.trim()).toBe("schema slowcall is up to date")
  })

  it("migrates a Postgres server given by --database-url", async () => {
    const first = await slowcall(["migrate", "--database-url", DATABASE_URL, "--schema", schema])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toMatch(new RegExp(`^applied migrations? [0-9, ]+ to schema ${schema}\\n$`))
    const second = await slowcall(["migrate", "--schema", schema], { DATABASE_URL })
    expect(second.stdout.trim()).toBe(`schema ${schema} is up to date`)
    const down = await slowcall(["migrate", "--database-url", "postgres://postgres@127.0.0.1:9/none"])
    expect(down.code).not.toBe(0)
    expect(down.stderr.trim().split("\n")).toHaveLength(1)
    expect(down.stderr).toMatch(/^slowcall: migrate failed: /)
  })

  it("on Redis has nothing to migrate and reports what the server keeps", async () => {
    const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"
    const text = await slowcall(["migrate", "--redis-url", redisUrl])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain("Redis needs no migration")
    expect(text.stdout).toMatch(
      /127\.0\.0\.1:6379: appendonly (yes|no), appendfsync \w+, save "[^"]*", maxmemory-policy [\w-]+/
    )
    const json = await slowcall(["migrate", "--redis-url", redisUrl, "--json"])
    const check = JSON.parse(json.stdout)
    expect(check).toMatchObject({ backend: "redis", nodes: [{ node: "127.0.0.1:6379" }] })
    const down = await slowcall(["migrate", "--redis-url", "redis://127.0.0.1:9"])
    expect(down.code).not.toBe(0)
    expect(down.stderr).toMatch(/^slowcall: migrate failed: /)
  })
})
