/**
 * What only the Postgres adapter offers, on the real server and on PGlite: migrations, transactional enqueue, the
 * outbox relay to an external transport, PgTransport on the Store's own tables, and store time kept at full
 * precision across the JS/SQL boundary.
 */

import { expect, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import type { TransportError } from "@slowcall/core/Errors"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import * as Transport from "@slowcall/core/Transport"
import { KeepAliveTakeover } from "@slowcall/testing/KeepAliveTakeover"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe } from "vitest"
import { makePgDriver, makePgliteDriver } from "../src/internal/driver.js"
import * as PgDriver from "../src/PgDriver.js"
import * as PgMigrator from "../src/PgMigrator.js"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"
import { DATABASE_URL, dropSchema, holdServer, only, serverLayer, submitOne, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("adapter")
const migratorSchema = uniqueSchema("migrate")
let lite: PGlite

beforeAll(async () => {
  lite = new PGlite()
  await lite.waitReady
})

afterAll(async () => {
  await lite.close()
  await dropSchema(schema)
  await dropSchema(migratorSchema)
})

const jobOptions = (queue: string, extra: Partial<SubmitItem> = {}) =>
  Effect.map(
    makeJobId,
    (id): SubmitItem => ({
      id,
      queue,
      type: "demo.echo",
      version: 1,
      inputHash: `hash-${id}`,
      input: { id },
      maxAttempts: 3,
      ...extra
    })
  )

describe("migrations", () => {
  it.live("two migrators racing on a fresh schema leave one correct schema; running again changes nothing", () =>
    Effect.gen(function* () {
      const a = makePgDriver({ connectionString: DATABASE_URL })
      const b = makePgDriver({ connectionString: DATABASE_URL })
      try {
        const [first, second] = yield* Effect.all(
          [PgMigrator.migrate(a, { schema: migratorSchema }), PgMigrator.migrate(b, { schema: migratorSchema })],
          { concurrency: 2 }
        )
        const versions = PgMigrator.migrations().map((migration) => migration.version)
        expect([...first.applied, ...second.applied].sort((x, y) => x - y)).toEqual(versions)
        const again = yield* PgMigrator.migrate(a, { schema: migratorSchema })
        expect(again.applied).toEqual([])
        const rows = yield* Effect.promise(() =>
          a.query<{ version: number }>(`SELECT version FROM "${migratorSchema}".migrations ORDER BY version`)
        )
        expect(rows.map((row) => row.version)).toEqual(versions)
        const tables = yield* Effect.promise(() =>
          a.query<{ name: string }>(
            "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            [migratorSchema]
          )
        )
        expect(tables.map((row) => row.name)).toEqual([
          "attempts",
          "batches",
          "charges",
          "fair_service",
          "finished_entries",
          "jobs",
          "lease_entries",
          "limits",
          "migrations",
          "queued_entries",
          "schedules"
        ])
      } finally {
        yield* Effect.promise(() => Promise.all([a.close(), b.close()]))
      }
    })
  )

  it.live("a failing migration rolls back together with its row, and the next run applies it", () =>
    Effect.gen(function* () {
      const driver = yield* Effect.promise(() => makePgliteDriver({}))
      const broken = [{ version: 1, name: "broken", sql: "CREATE TABLE __SCHEMA__.t (x int); SELECT 1/0;" }]
      const failed = yield* Effect.either(PgMigrator.migrate(driver, { schema: "s", migrations: broken }))
      expect(failed._tag).toBe("Left")
      const fixed = [{ version: 1, name: "fixed", sql: "CREATE TABLE __SCHEMA__.t (x int);" }]
      const applied = yield* PgMigrator.migrate(driver, { schema: "s", migrations: fixed })
      expect(applied.applied).toEqual([1])
      yield* Effect.promise(() => driver.close())
    })
  )

  it("schema names are identifiers, never SQL", () => {
    expect(() =>
      PgStore.make(makePgDriver({ connectionString: DATABASE_URL, max: 1 }), { schema: 'x"; DROP' })
    ).toThrow(/invalid schema name/)
  })
})

const backends = [
  {
    name: "postgres server",
    layer: () => PgStore.layer({ connectionString: DATABASE_URL, schema, pollMs: 60_000 }),
    /** The Store seam alone (no transport), for composing with another Transport. */
    storeLayer: () =>
      PgStore.layerFromDriver({ schema }).pipe(Layer.provide(PgDriver.layer({ connectionString: DATABASE_URL }))),
    driver: async () => makePgDriver({ connectionString: DATABASE_URL, max: 2 }),
    /** Runs `body` inside a transaction of the caller's own node-postgres client. */
    inTransaction: async <A>(body: (client: PgStore.SqlClient) => Promise<A>, commit: boolean): Promise<A> => {
      const client = new pg.Client({ connectionString: DATABASE_URL })
      client.on("error", () => {})
      await client.connect()
      try {
        await client.query("BEGIN")
        await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".orders (id text PRIMARY KEY)`)
        const value = await body(client)
        await client.query(commit ? "COMMIT" : "ROLLBACK")
        return value
      } finally {
        await client.end()
      }
    },
    orders: async (id: string): Promise<number> => {
      const client = new pg.Client({ connectionString: DATABASE_URL })
      await client.connect()
      try {
        await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".orders (id text PRIMARY KEY)`)
        const result = await client.query(`SELECT count(*)::int AS n FROM "${schema}".orders WHERE id = $1`, [id])
        return result.rows[0].n
      } finally {
        await client.end()
      }
    }
  },
  {
    name: "pglite",
    layer: () => PgStore.layerPglite({ db: lite, schema, pollMs: 60_000 }),
    /** The Store seam alone (no transport), for composing with another Transport. */
    storeLayer: () => PgStore.layerFromDriver({ schema }).pipe(Layer.provide(PgDriver.layerPglite({ db: lite }))),
    driver: () => makePgliteDriver({ db: lite }),
    inTransaction: async <A>(body: (client: PgStore.SqlClient) => Promise<A>, commit: boolean): Promise<A> =>
      lite.transaction(async (tx) => {
        await tx.query(`CREATE TABLE IF NOT EXISTS "${schema}".orders (id text PRIMARY KEY)`)
        const value = await body(tx)
        if (!commit) await tx.rollback()
        return value
      }),
    orders: async (id: string): Promise<number> => {
      await lite.query(`CREATE TABLE IF NOT EXISTS "${schema}".orders (id text PRIMARY KEY)`)
      const result = await lite.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".orders WHERE id = $1`,
        [id]
      )
      return result.rows[0]!.n
    }
  }
] as const

for (const backend of backends) {
  describe(`transactional enqueue and outbox: ${backend.name}`, () => {
    const enqueue = (queue: string, orderId: string, commit: boolean) =>
      Effect.gen(function* () {
        const options = yield* jobOptions(queue)
        yield* Effect.promise(() =>
          backend.inTransaction(async (client) => {
            await client.query(`INSERT INTO "${schema}".orders (id) VALUES ($1)`, [orderId])
            const reply = await Effect.runPromise(PgStore.submitInTransaction(client, { schema, items: [options] }))
            if (only(reply)._tag !== "Created") throw new Error("not created")
          }, commit)
        )
        return options.id
      })

    it.live("a job submitted in the caller's transaction commits and rolls back with the business write", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const committed = yield* enqueue("tx", `order-${yield* makeJobId}`, true)
        const rolledBackOrder = `order-${yield* makeJobId}`
        const rolledBack = yield* enqueue("tx", rolledBackOrder, false)
        expect((yield* store.get({ jobId: committed })).state).toBe("queued")
        const missing = yield* Effect.either(store.get({ jobId: rolledBack }))
        expect(missing._tag === "Left" && missing.left._tag).toBe("JobNotFound")
        expect(yield* Effect.promise(() => backend.orders(rolledBackOrder))).toBe(0)
      }).pipe(Effect.provide(backend.layer()))
    )

    it.live("the outbox relay publishes committed jobs at least once, never rolled-back ones, and marks them", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const external = yield* Transport.Transport
        const queue = `outbox-${(yield* makeJobId).slice(-8)}`
        // Drain what earlier tests left unpublished so this test sees only its own jobs.
        yield* store.relayOutbox({ publish: () => Effect.void, limit: 10_000 })
        const committed: Array<JobId> = []
        for (let i = 0; i < 3; i++) committed.push(yield* enqueue(queue, `o-${yield* makeJobId}`, true))
        yield* enqueue(queue, `o-${yield* makeJobId}`, false)

        // A transport failure in the middle of a pass: nothing is marked, the next pass publishes everything.
        let calls = 0
        const flaky = yield* Effect.either(
          store.relayOutbox({
            publish: (entry): Effect.Effect<void, TransportError | "transport down"> =>
              ++calls === 2
                ? Effect.fail("transport down" as const)
                : external.publish({ queue: entry.queue, items: [{ message: entry.message, delayMs: entry.delayMs }] })
          })
        )
        expect(flaky._tag === "Left" && flaky.left).toBe("transport down")
        const published = yield* store.relayOutbox({
          publish: (entry) =>
            external.publish({ queue: entry.queue, items: [{ message: entry.message, delayMs: entry.delayMs }] })
        })
        expect(published).toBe(3)
        expect(yield* store.relayOutbox({ publish: () => Effect.die("nothing left to publish") })).toBe(0)

        const deliveries = yield* external.receive({ queue, max: 10, visibilityMs: 10_000, waitMs: 0 })
        const delivered = deliveries.map((delivery) => delivery.jobId)
        // The first job went out twice (before the failure, then again): at least once, never lost.
        expect(new Set(delivered)).toEqual(new Set(committed))
        expect(delivered.length).toBeGreaterThanOrEqual(committed.length)
        expect(deliveries[0]).toMatchObject({ type: "demo.echo", version: 1, queue })
      }).pipe(Effect.provide(Layer.merge(backend.storeLayer(), Transport.layerMemory())))
    )

    it.live("the outbox relay layer relays to the Transport in context until its scope closes", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const external = yield* Transport.Transport
        const queue = `relay-${(yield* makeJobId).slice(-8)}`
        const scope = yield* Scope.make()
        yield* Layer.buildWithScope(PgStore.layerOutboxRelay({ intervalMs: 50 }), scope)
        const first = yield* jobOptions(queue)
        yield* submitOne(store, first)
        const deliveries = yield* external.receive({ queue, max: 1, visibilityMs: 10_000, waitMs: 5_000 })
        yield* Scope.close(scope, Exit.void)
        const second = yield* jobOptions(queue)
        yield* submitOne(store, second)
        yield* Effect.sleep("300 millis")

        expect(deliveries.map((delivery) => delivery.jobId)).toEqual([first.id])
        expect(yield* external.receive({ queue, max: 1, visibilityMs: 10_000, waitMs: 0 })).toEqual([])
      }).pipe(Effect.provide(Layer.merge(backend.storeLayer(), Transport.layerMemory())))
    )
  })

  describe(`PgTransport: ${backend.name}`, () => {
    const layer = () => backend.layer()

    const submitMany = (queue: string, count: number, extra: Partial<SubmitItem> = {}) =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const ids: Array<JobId> = []
        for (let i = 0; i < count; i++) {
          const options = yield* jobOptions(queue, extra)
          yield* submitOne(store, options)
          ids.push(options.id)
        }
        return ids
      })

    it.effect(
      "declares what it does: priority, defer, visibility that follows the lease, an ack that removes nothing",
      () =>
        Effect.gen(function* () {
          const transport = yield* Transport.Transport
          expect(transport.capabilities).toEqual({
            defer: true,
            maxReceiveCount: null,
            ackRemoves: false,
            visibilityFollowsLease: true,
            maxBatch: 1000,
            maxDelayMs: null,
            priority: true,
            claimsFromStore: true
          })
          expect(yield* PgTransport.PgTransport).toBe(transport)
        }).pipe(Effect.provide(layer()))
    )

    it.live("receive delivers due queued jobs in priority order, in batches, each once while hidden", () =>
      Effect.gen(function* () {
        const transport = yield* PgTransport.PgTransport
        const queue = `rx-${(yield* makeJobId).slice(-8)}`
        const low = yield* submitMany(queue, 3)
        const high = yield* submitMany(queue, 1, { priority: 5 })
        const first = yield* transport.receive({ queue, max: 2, visibilityMs: 30_000, waitMs: 0 })
        expect(first.map((delivery) => delivery.jobId)).toEqual([high[0], low[0]])
        expect(first[0]).toMatchObject({ queue, type: "demo.echo", version: 1, priority: 5, receiveCount: 1 })
        const second = yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 0 })
        expect(second.map((delivery) => delivery.jobId)).toEqual([low[1], low[2]])
        expect(yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 0 })).toEqual([])
      }).pipe(Effect.provide(layer()))
    )

    it.live("concurrent receivers take disjoint batches", () =>
      Effect.gen(function* () {
        const transport = yield* PgTransport.PgTransport
        const queue = `par-${(yield* makeJobId).slice(-8)}`
        const ids = yield* submitMany(queue, 40)
        const batches = yield* Effect.all(
          Array.from({ length: 4 }, () => transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 0 })),
          { concurrency: 4 }
        )
        const delivered = batches.flat().map((delivery) => delivery.jobId)
        expect(delivered).toHaveLength(40)
        expect(new Set(delivered)).toEqual(new Set(ids))
      }).pipe(Effect.provide(layer()))
    )

    it.live("a delivery that nobody settles comes back after visibilityMs with a new receipt", () =>
      Effect.gen(function* () {
        const transport = yield* PgTransport.PgTransport
        const queue = `vis-${(yield* makeJobId).slice(-8)}`
        const [id] = yield* submitMany(queue, 1)
        const [first] = yield* transport.receive({ queue, max: 1, visibilityMs: 300, waitMs: 0 })
        expect(yield* transport.receive({ queue, max: 1, visibilityMs: 300, waitMs: 0 })).toEqual([])
        const [again] = yield* transport.receive({ queue, max: 1, visibilityMs: 300, waitMs: 2_000 })
        expect(again?.jobId).toBe(id)
        expect(again?.receiveCount).toBe(2)
        expect(again?.receipt).not.toBe(first?.receipt)
        // The superseded receipt can no longer move the message.
        yield* transport.extend({ items: [{ delivery: first!, visibilityMs: 60_000 }] })
        yield* transport.defer({ items: [{ delivery: again!, delayMs: 0 }] })
        const [third] = yield* transport.receive({ queue, max: 1, visibilityMs: 300, waitMs: 0 })
        expect(third?.receiveCount).toBe(3)
      }).pipe(Effect.provide(layer()))
    )

    it.live(
      "defer hides a still-queued job; extend keeps it hidden; after an ack it returns when the hiding ends",
      () =>
        Effect.gen(function* () {
          const transport = yield* PgTransport.PgTransport
          const queue = `def-${(yield* makeJobId).slice(-8)}`
          const [id] = yield* submitMany(queue, 1)
          const [delivery] = yield* transport.receive({ queue, max: 1, visibilityMs: 100, waitMs: 0 })
          yield* transport.defer({ items: [{ delivery: delivery!, delayMs: 400 }] })
          yield* Effect.sleep("200 millis")
          expect(yield* transport.receive({ queue, max: 1, visibilityMs: 100, waitMs: 0 })).toEqual([])
          const [back] = yield* transport.receive({ queue, max: 1, visibilityMs: 200, waitMs: 2_000 })
          expect(back?.jobId).toBe(id)
          yield* transport.extend({ items: [{ delivery: back!, visibilityMs: 800 }] })
          yield* Effect.sleep("300 millis")
          expect(yield* transport.receive({ queue, max: 1, visibilityMs: 100, waitMs: 0 })).toEqual([])
          // ack writes nothing: the row is the message, and a job still queued must come back.
          yield* transport.ack({ items: [{ delivery: back! }] })
          const [again] = yield* transport.receive({ queue, max: 1, visibilityMs: 100, waitMs: 1_200 })
          expect(again?.jobId).toBe(id)
        }).pipe(Effect.provide(layer()))
    )

    it.live("publish never brings a hidden job forward: a defer survives a republish; a longer delay is kept", () =>
      Effect.gen(function* () {
        const transport = yield* PgTransport.PgTransport
        const queue = `pub-${(yield* makeJobId).slice(-8)}`
        const [deferred, waiting] = yield* submitMany(queue, 2)
        const message = (jobId: JobId) => ({ jobId, type: "demo.echo", version: 1 })
        const first = yield* transport.receive({ queue, max: 2, visibilityMs: 30_000, waitMs: 0 })
        expect(first.map((delivery) => delivery.jobId)).toEqual([deferred, waiting])
        // A worker without a handler for the type defers it; a sweeper then republishes both waiting jobs.
        yield* transport.defer({ items: [{ delivery: first[0]!, delayMs: 30_000 }] })
        yield* transport.defer({ items: [{ delivery: first[1]!, delayMs: 300 }] })
        yield* transport.publish({ queue, items: [{ message: message(deferred!) }] })
        yield* transport.publish({ queue, items: [{ message: message(waiting!), delayMs: 1_000 }] })

        expect(yield* transport.receive({ queue, max: 2, visibilityMs: 30_000, waitMs: 600 })).toEqual([])
        const later = yield* transport.receive({ queue, max: 2, visibilityMs: 30_000, waitMs: 1_500 })
        expect(later.map((delivery) => delivery.jobId)).toEqual([waiting])
      }).pipe(Effect.provide(layer()))
    )

    it.live("a job the Store queues again is deliverable at once, whatever hid its row before", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const transport = yield* PgTransport.PgTransport
        const queue = `req-${(yield* makeJobId).slice(-8)}`
        const [id] = yield* submitMany(queue, 1)
        const [delivery] = yield* transport.receive({ queue, max: 1, visibilityMs: 60_000, waitMs: 0 })
        const claim = only(yield* store.claim({ items: [{ jobId: id!, owner: "w", leaseMs: 60_000 }] }))
        expect(claim._tag).toBe("Claimed")
        expect(delivery?.jobId).toBe(id)
        const token = claim._tag === "Claimed" ? claim.job.leaseToken : -1
        const released = only(yield* store.settle({ items: [{ jobId: id!, token, outcome: { _tag: "Release" } }] }))
        expect(released).toMatchObject({ _tag: "Settled", job: { state: "queued" } })
        yield* transport.publish({ queue, items: [{ message: { jobId: id!, type: "demo.echo", version: 1 } }] })
        const [back] = yield* transport.receive({ queue, max: 1, visibilityMs: 60_000, waitMs: 0 })
        expect(back?.jobId).toBe(id)
      }).pipe(Effect.provide(layer()))
    )

    it.live("claimed and terminal jobs are never delivered; publish with a delay holds a job back", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const transport = yield* PgTransport.PgTransport
        const queue = `st-${(yield* makeJobId).slice(-8)}`
        const [claimed, delayed] = yield* submitMany(queue, 2)
        yield* store.claim({ items: [{ jobId: claimed!, owner: "w", leaseMs: 60_000 }] })
        yield* transport.publish({ queue, items: [{ message: { jobId: claimed!, type: "demo.echo", version: 1 } }] })
        yield* transport.publish({
          queue,
          items: [{ message: { jobId: delayed!, type: "demo.echo", version: 1 }, delayMs: 500 }]
        })
        expect(yield* transport.receive({ queue, max: 10, visibilityMs: 1_000, waitMs: 0 })).toEqual([])
        const later = yield* transport.receive({ queue, max: 10, visibilityMs: 1_000, waitMs: 3_000 })
        expect(later.map((delivery) => delivery.jobId)).toEqual([delayed])
      }).pipe(Effect.provide(layer()))
    )

    it.live("a submit wakes a waiting receive through NOTIFY, long before the polling fallback", () =>
      Effect.gen(function* () {
        const transport = yield* PgTransport.PgTransport
        const queue = `wake-${(yield* makeJobId).slice(-8)}`
        const waiting = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: 5_000, waitMs: 30_000 }))
        yield* Effect.sleep("200 millis")
        const started = Date.now()
        const [id] = yield* submitMany(queue, 1)
        const deliveries = yield* Fiber.join(waiting)
        expect(deliveries.map((delivery) => delivery.jobId)).toEqual([id])
        expect(Date.now() - started).toBeLessThan(5_000)
      }).pipe(Effect.provide(layer()))
    )

    it.live("with every notification lost, polling still finds the work", () =>
      Effect.gen(function* () {
        const queue = `poll-${(yield* makeJobId).slice(-8)}`
        const driver = yield* Effect.promise(() => backend.driver())
        const deaf = { ...driver, listen: async () => async () => {} }
        const transport = yield* PgTransport.make(deaf, { schema, pollMs: 100 })
        const waiting = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: 5_000, waitMs: 5_000 }))
        yield* Effect.sleep("300 millis")
        const [id] = yield* submitMany(queue, 1)
        const deliveries = yield* Fiber.join(waiting)
        expect(deliveries.map((delivery) => delivery.jobId)).toEqual([id])
        yield* Effect.promise(() => driver.close())
      }).pipe(Effect.scoped, Effect.provide(layer()))
    )
  })

  // Layer.suspend: PGlite's database is opened in beforeAll, after the tests are registered.
  KeepAliveTakeover({ name: backend.name, layer: Layer.suspend(() => backend.layer()) })
}

describe("store time on the server", () => {
  it.effect("updatedAt moves forward by one microsecond per write under a frozen clock, kept exactly in JS", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const now = 1_764_424_454_123.457
      const options = yield* jobOptions("micro")
      const submitted = only(yield* store.submit({ items: [options], now }))
      const id = options.id
      const claim = only(yield* store.claim({ items: [{ jobId: id, owner: "w", leaseMs: 60_000 }], now }))
      expect(claim._tag).toBe("Claimed")
      const token = claim._tag === "Claimed" ? claim.job.leaseToken : -1
      const stamps: Array<number> = [(yield* store.get({ jobId: id })).updatedAt]
      for (let i = 0; i < 3; i++) {
        const reply = yield* store.heartbeat({ items: [{ jobId: id, token, leaseMs: 60_000 }], now })
        expect(reply.now).toBe(now)
        stamps.push((yield* store.get({ jobId: id })).updatedAt)
      }
      yield* store.charge({ items: [{ jobId: id, callId: "c1", token, amountCents: 1, settled: false }], now })
      stamps.push((yield* store.get({ jobId: id })).updatedAt)
      const settled = only(
        yield* store.settle({ items: [{ jobId: id, token, outcome: { _tag: "Complete", result: null } }], now })
      )
      stamps.push(settled._tag === "Settled" ? settled.job.updatedAt : Number.NaN)

      expect(submitted._tag === "Created" && submitted.job.updatedAt).toBe(now)
      expect(stamps).toEqual([1, 2, 3, 4, 5, 6].map((k) => Math.round((now + k / 1000) * 1000) / 1000))
    }).pipe(Effect.provide(serverLayer(uniqueSchema("micro"))))
  )

  it.effect("without an override every reply carries the server's time, and one batch writes at one instant", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const first = yield* jobOptions("clock")
      const second = yield* jobOptions("clock")
      const before = yield* store.now
      // The same job twice: two statements, one store time.
      const reply = yield* store.submit({ items: [first, second] })
      const claims = yield* store.claim({
        items: [
          { jobId: first.id, owner: "a", leaseMs: 1_000 },
          { jobId: first.id, owner: "b", leaseMs: 1_000 }
        ]
      })
      const after = yield* store.now

      expect(reply.now).toBeGreaterThanOrEqual(before)
      expect(claims.now).toBeGreaterThanOrEqual(reply.now)
      expect(claims.now).toBeLessThanOrEqual(after)
      expect(claims.results.map((result) => result._tag)).toEqual(["Claimed", "Busy"])
      const [claimed, busy] = claims.results
      expect(claimed?._tag === "Claimed" && claimed.job.leaseUntil).toBe(claims.now + 1_000)
      expect(busy?._tag === "Busy" && busy.until).toBe(claims.now + 1_000)
    }).pipe(Effect.provide(serverLayer(uniqueSchema("clock"))))
  )
})
