/**
 * Test support for the pairings: a fresh Postgres schema per test file (dropped when its layer closes), a job
 * poll with a bound, and a Transport wrapper that counts deliveries.
 */
import { randomBytes } from "node:crypto"
import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import type { Job, JobId } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import { Transport } from "@slowcall/core/Transport"
import { Effect, Layer } from "effect"
import pg from "pg"

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

export const uniqueName = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`

const dropSchema = async (schema: string): Promise<void> => {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

/** The Postgres Store seam (PgDriver, PgStore, Store, Query; no transport) on a fresh schema, dropped afterwards. */
export const pgStoreLayer = (schema: string) =>
  Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(schema)))).pipe(
    Layer.provideMerge(
      PgStore.layerFromDriver({ schema }).pipe(Layer.provideMerge(PgDriver.layer({ connectionString: DATABASE_URL })))
    )
  )

/** Polls until every job is terminal (or `withinMs` passed) and returns them as they are then. */
export const awaitTerminal = (jobIds: ReadonlyArray<JobId>, withinMs = 60_000) =>
  Effect.gen(function* () {
    const query = yield* Query
    const deadline = Date.now() + withinMs
    while (true) {
      const jobs: Array<Job> = []
      for (const jobId of jobIds) jobs.push(yield* query.get({ jobId }))
      const done = jobs.every((job) => job.state !== "queued" && job.state !== "running")
      if (done || Date.now() >= deadline) return jobs
      yield* Effect.sleep(200)
    }
  })

/**
 * A Transport whose deliveries are counted per job, and which, with `visibilityMs`, hides each delivery for that
 * long only and never extends it: a visibility shorter than the call, so SQS delivers a message again while its job
 * still runs.
 */
export const observed = (options: { readonly visibilityMs?: number | undefined } = {}) => {
  const deliveries = new Map<string, number>()
  const layer = Layer.effect(
    Transport,
    Effect.map(Transport, (inner) => ({
      ...inner,
      receive: (o: Parameters<typeof inner.receive>[0]) =>
        inner.receive(options.visibilityMs === undefined ? o : { ...o, visibilityMs: options.visibilityMs }).pipe(
          Effect.tap((got) =>
            Effect.sync(() => {
              for (const d of got) deliveries.set(d.jobId, (deliveries.get(d.jobId) ?? 0) + 1)
            })
          )
        ),
      extend: options.visibilityMs === undefined ? inner.extend : () => Effect.void
    }))
  )
  return { deliveries, layer }
}
