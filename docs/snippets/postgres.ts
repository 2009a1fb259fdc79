import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Client from "@slowcall/core/Client"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer } from "effect"
import type { summarize } from "./handlers.js"

// #region server
// A real server through a node-postgres Pool. Migrations run when the layer is built (safe to run concurrently).
// The layer provides Store and Transport (and PgStore / PgTransport) over the same pool.
const Postgres = PgStore.layer({
  connectionString: "postgres://postgres@127.0.0.1:5432/app",
  schema: "slowcall",
  queryTimeoutMs: 10_000
})
// #endregion server

// #region config
// The same from the environment: DATABASE_URL, and SLOWCALL_SCHEMA (default "slowcall").
export const FromEnv = PgStore.layerConfig()
// #endregion config

// #region pglite
// Embedded Postgres in this process: zero setup. On disk with `dataDir`, in memory without it.
export const Embedded = PgStore.layerPglite({ dataDir: ".slowcall/db" })
// #endregion pglite

// #region app
export const makeApp = (handler: typeof summarize) =>
  Layer.mergeAll(
    Client.layer,
    Worker.layer({ queue: "docs", handlers: [handler], concurrency: 8 }),
    Sweeper.layer({ queue: "docs" })
  ).pipe(Layer.provideMerge(Postgres))
// #endregion app

// #region purge
// Retention from your own code (`serve --retention 7d` does the same): the queue's finished jobs created more than
// 7 days ago, a thousand per statement, until a chunk comes back short.
export const purgeWeekOld = Effect.gen(function* () {
  const store = yield* PgStore.PgStore
  const createdBefore = (yield* store.now) - 7 * 86_400_000
  let purged = 0
  while (true) {
    const ids = yield* store.purge({ queue: "docs", createdBefore, limit: 1_000 })
    purged += ids.length
    if (ids.length < 1_000) return purged
  }
})
// #endregion purge
