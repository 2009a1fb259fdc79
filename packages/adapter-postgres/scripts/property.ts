/**
 * The sequential model-based property (`@slowcall/testing/StoreProperty`) on this adapter, outside a test runner,
 * with `PgStore.purge` among the verbs: on the server at DATABASE_URL (a fresh schema, dropped after) or, with
 * --pglite, on PGlite in memory; with --batches, the batch verbs too. `npm run mutants` runs it in a scratch copy of
 * the repository to show that a planted bug in the adapter's SQL is caught.
 *
 * On the server, once the sequences pass, every job the run left must have exactly its entry (migration 0015's
 * invariant, `entryMismatches`), so a planted bug in the entries' triggers is caught as well.
 *
 * Prints the figures or the failure report, then one JSON line: { ok, runs, ms, failure }. Exits 1 when the
 * property fails.
 *
 * Usage: tsx packages/adapter-postgres/scripts/property.ts [--runs 1000] [--seed 1] [--path P] [--pglite] [--batches]
 *   [--focus-purge] [--max-commands 40]
 */
import { randomBytes } from "node:crypto"
import { check } from "@slowcall/testing/StorePropertyCheck"
import { Effect, Layer } from "effect"
import pg from "pg"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { entryMismatches } from "../test/entries.js"
import { flag, report, url, value } from "./propertyScript.js"

const runs = value("runs")
const seed = value("seed")
const path = value("path")
const pglite = flag("pglite")
const schema = `sprop_${randomBytes(5).toString("hex")}`

const layer = pglite
  ? PgStore.layerFromDriver().pipe(Layer.provideMerge(PgDriver.layerPglite()))
  : PgStore.layerFromDriver({ schema }).pipe(Layer.provideMerge(PgDriver.layer({ connectionString: url })))

await report(
  async () => {
    const result = await check({
      name: pglite ? "pglite in memory" : "postgres server",
      layer,
      purge: Effect.map(PgStore.PgStore, (store) => store.purge),
      batches: flag("batches"),
      focus: flag("focus-purge") ? "purge" : undefined,
      ...(value("max-commands") === undefined ? {} : { maxCommands: Number(value("max-commands")) }),
      ...(runs === undefined ? {} : { numRuns: Number(runs) }),
      ...(seed === undefined ? {} : { seed: Number(seed) }),
      ...(path === undefined ? {} : { path })
    })
    if (!pglite) {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      const mismatches = await entryMismatches(
        { query: async (sql) => (await client.query(sql)).rows as Array<Record<string, unknown>> },
        schema
      ).finally(() => client.end())
      if (mismatches.length > 0) {
        throw new Error(
          `StoreProperty (postgres server) found ${mismatches.length} entries that disagree with their jobs, first ${JSON.stringify(mismatches[0])}`
        )
      }
    }
    return result
  },
  (result) => `${result.runs} sequences in ${(result.ms / 1000).toFixed(1)} s`,
  pglite ? undefined : schema
)
