/**
 * The sequential model-based property (`@slowcall/testing/StoreProperty`) on this adapter, outside a test runner,
 * with `PgStore.purge` among the verbs: on the server at DATABASE_URL (a fresh schema, dropped after) or, with
 * --pglite, on PGlite in memory; with --batches, the batch verbs too. `npm run mutants` runs it in a scratch copy of
 * the repository to show that a planted bug in the adapter's SQL is caught.
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

const args = process.argv.slice(2)
const value = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args[i + 1] : undefined
}
const runs = value("runs")
const seed = value("seed")
const path = value("path")
const pglite = args.includes("--pglite")
const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const schema = `sprop_${randomBytes(5).toString("hex")}`

const layer = pglite
  ? PgStore.layerFromDriver().pipe(Layer.provideMerge(PgDriver.layerPglite()))
  : PgStore.layerFromDriver({ schema }).pipe(Layer.provideMerge(PgDriver.layer({ connectionString: url })))

const dropSchema = async (): Promise<void> => {
  const client = new pg.Client({ connectionString: url })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

let outcome: { readonly ok: boolean; readonly failure: string | null } & Partial<Awaited<ReturnType<typeof check>>>
try {
  const result = await check({
    name: pglite ? "pglite in memory" : "postgres server",
    layer,
    purge: Effect.map(PgStore.PgStore, (store) => store.purge),
    batches: args.includes("--batches"),
    focus: args.includes("--focus-purge") ? "purge" : undefined,
    ...(value("max-commands") === undefined ? {} : { maxCommands: Number(value("max-commands")) }),
    ...(runs === undefined ? {} : { numRuns: Number(runs) }),
    ...(seed === undefined ? {} : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path })
  })
  console.log(`${result.runs} sequences in ${(result.ms / 1000).toFixed(1)} s`)
  outcome = { ok: true, failure: null, ...result }
} catch (error) {
  const message = error instanceof Error ? error.message : String(error)
  console.log(message)
  outcome = { ok: false, failure: message.split("\n")[0] ?? message }
} finally {
  if (!pglite) await dropSchema()
}
console.log(JSON.stringify(outcome))
process.exit(outcome.ok ? 0 : 1)
