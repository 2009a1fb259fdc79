/**
 * The hostile-input fuzzer (`fuzz.ts`) against the live server on embedded PGlite and on the Postgres server
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test, in a schema of its own): at least 10,000 requests
 * per backend, with authentication on, a small body limit and a bound on queued jobs so that every refusal path is
 * met. Prints inputs tried, responses by status, 5xx (must be 0) and writes by rejected requests (must be 0).
 * `FUZZ_RUNS` and `FUZZ_SEED` change the budget and the seed. On PGlite a full run takes 2 to 4 minutes on a busy
 * machine (the resource writes are three transactions each), hence the long timeout.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import type { Layer } from "effect"
import { Either } from "effect"
import { DATABASE_URL as databaseUrl, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import * as Auth from "../src/Auth.js"
import { fuzz, resourcesByRejected, schedulesByRejected, writesByRejected } from "./fuzz.js"
import { type Backend, start, withPgSchedules } from "./harness.js"

const numRuns = Number(process.env.FUZZ_RUNS ?? 10_000)
const seed = Number(process.env.FUZZ_SEED ?? 16)
const maxBodyBytes = 16 * 1024
const tokens = [Auth.makeToken(), Auth.makeToken()]
const table = Either.getOrThrow(
  Auth.parseTokens(`fuzz-a ${Auth.hashToken(tokens[0]!)}\nfuzz-b ${Auth.hashToken(tokens[1]!)}`)
)
const schema = uniqueSchema("http_fuzz")
afterAll(() => dropSchema(schema))

const backends: ReadonlyArray<readonly [string, () => Layer.Layer<Backend, unknown>]> = [
  ["PGlite", () => withPgSchedules(PgStore.layerPglite({ schema: "slowcall" }), "slowcall")],
  [
    "the Postgres server",
    () => withPgSchedules(PgStore.layer({ connectionString: databaseUrl, schema, queryTimeoutMs: 10_000 }), schema)
  ]
]

describe("hostile input", () => {
  for (const [name, backend] of backends) {
    it(`on ${name}: ${numRuns} requests, no 5xx, nothing written by a rejected request, the server stays up`, async () => {
      const queue = `fuzz-${Date.now().toString(36)}`
      const server = await start(backend(), {
        queue,
        tokens: table,
        // One of the two tenants may change resources, so that limits, pauses and resumes are accepted too.
        operators: ["fuzz-a"],
        maxBodyBytes,
        maxQueued: 40,
        handlers: [],
        jobTypes: ["test.work", "demo.echo"],
        sseKeepAliveMs: 1_000
      })
      try {
        const started = Date.now()
        const counts = await fuzz({ name, server, queue, tokens, maxBodyBytes, numRuns, seed })
        const stray = await writesByRejected(server, queue, counts)
        const strayResources = await resourcesByRejected(server, counts)
        const straySchedules = await schedulesByRejected(server, counts)
        const health = await fetch(`${server.url}/healthz`)
        const seconds = ((Date.now() - started) / 1000).toFixed(1)
        const statuses = Object.entries(counts.byStatus)
          .sort(([a], [b]) => Number(a) - Number(b))
          .map(([status, n]) => `${status}: ${n}`)
          .join(", ")
        console.log(
          `fuzz on ${name}: ${counts.tried} inputs tried in ${seconds} s (seed ${seed}); responses by status ` +
            `{ ${statuses} }; 5xx: ${counts.fiveHundreds}; jobs created by accepted requests: ${counts.created.size}; ` +
            `writes by rejected requests: ${stray}; resources written: ${counts.resourcesWritten.size}, by rejected ` +
            `requests: ${strayResources}; schedules written: ${counts.schedulesWritten.size}, by rejected requests: ` +
            `${straySchedules}; server up: ${health.status === 200}`
        )
        expect(counts.tried).toBe(numRuns)
        expect(counts.fiveHundreds).toBe(0)
        expect(stray).toBe(0)
        expect(strayResources).toBe(0)
        expect(straySchedules).toBe(0)
        expect(health.status).toBe(200)
        // A full run meets every refusal path, and acceptance.
        if (numRuns >= 10_000) {
          for (const status of [200, 202, 400, 401, 403, 404, 409, 413, 415, 421, 422, 429]) {
            expect(counts.byStatus[status] ?? 0, `status ${status}`).toBeGreaterThan(0)
          }
          expect(counts.resourcesWritten.size).toBeGreaterThan(0)
          expect(counts.schedulesWritten.size).toBeGreaterThan(0)
        }
      } finally {
        await server.close()
      }
    }, 420_000)
  }
})
