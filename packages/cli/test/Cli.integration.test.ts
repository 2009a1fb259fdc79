/**
 * The `slowcall` executable, run as a user runs it (`packages/cli/bin/slowcall.mjs`), against a live server on the
 * memory store and against PGlite, the Postgres server and Redis for `migrate`.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer } from "effect"
import { DATABASE_URL, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { completeJob, failJob, post } from "../../http/test/contract.js"
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
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "cli"
      }
    )
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

  it("jobs get prints the input: pretty and redacted, its first 300 characters when large, or its reference", async () => {
    const job = await submit({ text: "summarise", provider: { api_key: "sk-abcdefghijklmnop0123" } })
    const text = await slowcall(["jobs", "get", job.id, "--url", url])
    expect(text.code, text.stderr).toBe(0)
    const lines = text.stdout.split("\n")
    const at = lines.findIndex((line) => line.startsWith("input "))
    expect(lines.slice(at, at + 6)).toEqual([
      "input        {",
      '               "text": "summarise",',
      '               "provider": {',
      '                 "api_key": "[redacted]"',
      "               }",
      "             }"
    ])
    expect(text.stdout).not.toContain("abcdefghijklmnop0123")

    const large = await submit({ text: "x".repeat(10_000) })
    const cut = await slowcall(["jobs", "get", large.id, "--url", url])
    expect(cut.stdout).toMatch(/^input {8}\{"text":"x{280,}… \(over 8 KB: first 300 characters\)$/m)

    const byRef = (await (
      await post(url, "/v1/jobs", { type: "test.work", inputRef: "s3://inputs/doc-42.json" })
    ).json()) as any
    const ref = await slowcall(["jobs", "get", byRef.id, "--url", url])
    expect(ref.stdout).toMatch(/^input ref {4}s3:\/\/inputs\/doc-42\.json$/m)
  })

  it("jobs list and jobs cancel", async () => {
    const job = await submit({ text: "cancel me" })
    const list = await slowcall(["jobs", "list", "--state", "queued", "--json", "--url", url])
    expect(list.code, list.stderr).toBe(0)
    // --json prints the API's body exactly as GET /v1/jobs answers it.
    const api = (await (await fetch(`${url}/v1/jobs?state=queued&limit=20`)).json()) as Record<string, unknown>
    // Two reads, so the store time each was answered at (`now`) differs; everything else is the same body.
    const { now: _cliNow, ...printed } = JSON.parse(list.stdout)
    const { now: _apiNow, ...answered } = api
    expect(printed).toEqual(answered)
    expect(Object.keys(JSON.parse(list.stdout))).toEqual(Object.keys(api))
    expect(JSON.parse(list.stdout).jobs.map((j: any) => j.id)).toContain(job.id)
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

  it("attempts read as the dashboard writes them: this run against its cap, then the lifetime count", async () => {
    // Arrange: one attempt allowed; it fails, the dead letter is replayed, and the new run's attempt fails too.
    const { id } = (await (
      await post(url, "/v1/jobs", { type: "test.work", maxAttempts: 1, input: { text: "twice" } })
    ).json()) as any
    await server.run(failJob(id, "auth", 1))
    expect((await post(url, "/v1/dead-letters/replay", { ids: [id] })).status).toBe(200)
    await server.run(failJob(id, "auth", 1))
    // Act
    const table = await slowcall(["jobs", "list", "--state", "failed", "--url", url])
    const one = await slowcall(["jobs", "get", id, "--url", url])
    // Assert
    expect(table.code, table.stderr).toBe(0)
    expect(table.stdout.split("\n").find((line) => line.startsWith(id))).toMatch(/\sfailed\s+1\/1 \(2 in all\)\s/)
    expect(one.stdout).toContain("attempts     1/1 (2 in all)\n")
    // Leave no dead letter behind for the dlq test.
    await post(url, "/v1/dead-letters/replay", { ids: [id] })
    await server.run(completeJob(id))
  })

  it("jobs list finds a job by its idempotency key and pages with --after", async () => {
    // Arrange
    const keyed = await post(
      url,
      "/v1/jobs",
      { type: "test.work", input: { text: "keyed" } },
      { "idempotency-key": "cli-key-1" }
    )
    const { id } = (await keyed.json()) as any
    await submit({ text: "page 1" })
    await submit({ text: "page 2" })
    // Act
    const byKey = await slowcall(["jobs", "list", "--idempotency-key", "cli-key-1", "--json", "--url", url])
    const first = await slowcall(["jobs", "list", "--limit", "1", "--url", url])
    const next = /^next page: --after (\S+)$/m.exec(first.stdout)?.[1]
    const second = await slowcall(["jobs", "list", "--limit", "1", "--after", next ?? "", "--json", "--url", url])
    // Assert
    expect(JSON.parse(byKey.stdout).jobs.map((j: any) => j.id)).toEqual([id])
    expect(next).toBeDefined()
    expect(JSON.parse(second.stdout).jobs).toHaveLength(1)
    expect(JSON.parse(second.stdout).jobs[0].id).not.toBe(next)
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

  it("dlq list shows each group's count, cost, sample input and last error, most costly first, and pages", async () => {
    const own = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "cli-dlq-list"
      }
    )
    try {
      const failWith = async (input: unknown, errorClass: "auth" | "rate_limited", cents: number) => {
        const job = (await (await post(own.url, "/v1/jobs", { type: "test.work", input })).json()) as any
        await own.run(failJob(job.id, errorClass, cents))
        return job
      }
      await failWith({ doc: "poison", token: "tok_0123456789abcdef" }, "rate_limited", 2)
      await failWith({ doc: "poison", token: "tok_0123456789abcdef" }, "rate_limited", 2)
      await failWith({ doc: "alone" }, "auth", 9)

      const list = await slowcall(["dlq", "list", "--url", own.url])
      expect(list.code, list.stderr).toBe(0)
      const [header, first, second, ...rest] = list.stdout.trimEnd().split("\n")
      expect(header).toMatch(/^ERROR CLASS\s+INPUT\s+JOBS\s+COST\s+LAST FAILED\s+SAMPLE INPUT\s+LAST ERROR$/)
      expect(first).toMatch(/^auth\s+\(each once\)\s+1\s+9¢\s+\S+Z\s+\{"doc":"alone"\}\s+HTTP 401 from provider/)
      expect(second).toMatch(/^rate_limited\s+[0-9a-f]{12}\s+2\s+4¢\s/)
      expect(second).toContain('{"doc":"poison","token":"[redacted]"}')
      expect(list.stdout).not.toContain("0123456789abcdef")
      expect(rest).toEqual(["2 groups, 3 dead letters, 13¢ in all; arrivals 0.60/min"])

      const page = await slowcall(["dlq", "list", "--limit", "1", "--sort", "count", "--url", own.url])
      expect(page.stdout).toMatch(/^rate_limited\s/m)
      const next = /^next page: --cursor (\S+)$/m.exec(page.stdout)![1]!
      const after = await slowcall([
        "dlq",
        "list",
        "--limit",
        "1",
        "--sort",
        "count",
        "--cursor",
        next,
        "--url",
        own.url
      ])
      expect(after.stdout).toMatch(/^auth\s+\(each once\)/m)
      expect(after.stdout).not.toContain("next page")
      const json = await slowcall(["dlq", "list", "--json", "--url", own.url])
      expect(JSON.parse(json.stdout).groups[0]).toMatchObject({ errorClass: "auth", count: 1, collapsed: true })
    } finally {
      await own.close()
    }
  })

  it("dlq replay replays only what it is told, in one HTTP call; --all says how many and what it costs first", async () => {
    const own = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "cli-dlq-replay"
      }
    )
    // Every request the CLI makes passes this counting proxy on its way to the server.
    const calls: Array<string> = []
    const proxy = createServer(async (req, res) => {
      calls.push(`${req.method} ${req.url}`)
      const chunks: Array<Buffer> = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const answer = await fetch(own.url + req.url, {
        method: req.method!,
        headers: { "content-type": "application/json" },
        ...(req.method === "POST" ? { body: Buffer.concat(chunks) } : {})
      })
      res.writeHead(answer.status, { "content-type": "application/json" })
      res.end(await answer.text())
    })
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
    try {
      const jobs: Array<{ readonly id: string }> = []
      for (let i = 0; i < 6; i++) {
        const job = (await (await post(own.url, "/v1/jobs", { type: "test.work", input: { i } })).json()) as any
        await own.run(failJob(job.id, i < 5 ? "auth" : "rate_limited", 2))
        jobs.push(job)
      }
      const states = () =>
        own.run(
          Effect.flatMap(Query.Query, (query) =>
            Effect.forEach(jobs, (job) => Effect.map(query.get({ jobId: job.id as JobId }), (j) => j.state))
          )
        )

      // Nothing named: one line, exit 1, no request at all, nothing moves.
      const refused = await slowcall(["dlq", "replay", "--url", proxyUrl])
      expect(refused.code).toBe(1)
      expect(refused.stderr.trim()).toBe(
        "slowcall: name what to replay: --id <job-id>, a filter (--error-class, --type, --input-hash) or --all"
      )
      expect(calls).toEqual([])

      const dry = await slowcall(["dlq", "replay", "--error-class", "auth", "--dry-run", "--url", proxyUrl])
      expect(dry.code, dry.stderr).toBe(0)
      expect(dry.stdout.trim()).toBe("would replay 5 dead letters, estimated spend 10¢ (one attempt each)")
      expect(await states()).toEqual(["failed", "failed", "failed", "failed", "failed", "failed"])

      calls.length = 0
      const replay = await slowcall(["dlq", "replay", "--error-class", "auth", "--url", proxyUrl])
      expect(replay.code, replay.stderr).toBe(0)
      expect(replay.stdout.trim()).toBe("replayed 5 dead letters, skipped 0, estimated spend 10¢")
      expect(replay.stderr).toBe("")
      expect(calls).toEqual(["POST /v1/dead-letters/replay"])
      expect(await states()).toEqual(["queued", "queued", "queued", "queued", "queued", "failed"])

      calls.length = 0
      const all = await slowcall(["dlq", "replay", "--all", "--url", proxyUrl])
      expect(all.code, all.stderr).toBe(0)
      expect(all.stderr.trim()).toBe("replaying 1 dead letter, estimated spend 2¢ (one attempt each)")
      expect(all.stdout.trim()).toBe("replayed 1 dead letter, skipped 0, estimated spend 2¢")
      // The count first (a dry run), then the one replay.
      expect(calls).toEqual(["POST /v1/dead-letters/replay", "POST /v1/dead-letters/replay"])
      expect(await states()).toEqual(["queued", "queued", "queued", "queued", "queued", "queued"])

      const none = await slowcall(["dlq", "replay", "--id", jobs[0]!.id, "--json", "--url", proxyUrl])
      expect(JSON.parse(none.stdout)).toEqual({ matched: 0, replayed: 0, skipped: 1, estimatedCents: 0, capped: false })
    } finally {
      await new Promise((resolve) => proxy.close(resolve))
      await own.close()
    }
  })

  it("conventions: no colour when piped, one prefixed error line for every kind of failure", async () => {
    // Piped and without NO_COLOR: still no escape sequences, in help as in errors.
    const help = await slowcall(["advise", "--help"], { NO_COLOR: "" })
    expect(help.code, help.stderr).toBe(0)
    expect(help.stdout).toContain("--hop")
    expect(help.stdout).not.toContain("\u001b[")
    expect(help.stdout).toMatch(/--hop NAME=DURATION +a hop on the request path[\s\S]*\(required;\s+repeatable\)/)
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

  it("refuses --wizard and a duration without a unit with one line each", async () => {
    const [wizard, unitless] = await Promise.all([
      slowcall(["token", "--wizard"]),
      slowcall(["advise", "--p99", "45", "--hop", "lb=60s"])
    ])
    expect(wizard).toEqual({ code: 1, stdout: "", stderr: "slowcall: Unknown option --wizard (see --help)\n" })
    expect(unitless).toEqual({ code: 1, stdout: "", stderr: "slowcall: --p99: 45 what? (45s, 45000ms)\n" })
  }, 120_000)

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
