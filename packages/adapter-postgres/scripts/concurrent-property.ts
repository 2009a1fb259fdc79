/**
 * The concurrent model-based property (`@slowcall/testing/StoreConcurrency`) on this adapter, outside a test
 * runner: on the server at DATABASE_URL (a fresh schema, dropped after; a pool of 16 connections, so each command of
 * a batch has its own) or, with --pglite, on PGlite in memory. `npm run mutants` runs it in a scratch copy of the
 * repository to show that a planted lost update is caught.
 *
 * Prints the figures or the failure report, then one JSON line: { ok, runs, concurrentSteps, commands, ms, failure }.
 * Exits 1 when the property fails.
 *
 * Usage: tsx packages/adapter-postgres/scripts/concurrent-property.ts [--runs 110] [--seed 1] [--path P]
 *   [--scenario "16 charges on one job, distinct call ids"]... [--no-shrink] [--pglite]
 */
import { randomBytes } from "node:crypto"
import { check } from "@slowcall/testing/StoreConcurrency"
import { Layer } from "effect"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { argv, flag, report, url, value } from "./propertyScript.js"

const scenarios = argv.flatMap((arg, i) => (arg === "--scenario" && argv[i + 1] !== undefined ? [argv[i + 1]!] : []))
const runs = value("runs")
const seed = value("seed")
const path = value("path")
const pglite = flag("pglite")
// Commits need not wait for the WAL flush in these sessions: what concurrent transactions see is unchanged.
const sessions = new URL(url)
sessions.searchParams.set("options", "-c synchronous_commit=off")
const schema = `cprop_${randomBytes(5).toString("hex")}`

const layer = pglite
  ? PgStore.layerFromDriver().pipe(Layer.provideMerge(PgDriver.layerPglite()))
  : PgStore.layerFromDriver({ schema }).pipe(
      Layer.provideMerge(PgDriver.layer({ connectionString: sessions.toString(), max: 16 }))
    )

await report(
  () =>
    check({
      name: pglite ? "pglite in memory" : "postgres server",
      layer,
      ...(scenarios.length > 0 ? { scenarios } : {}),
      ...(runs === undefined ? {} : { numRuns: Number(runs) }),
      ...(seed === undefined ? {} : { seed: Number(seed) }),
      ...(path === undefined ? {} : { path }),
      shrink: !flag("no-shrink")
    }),
  (result) =>
    `${result.runs} sequences, ${result.concurrentSteps} concurrent batches, ${result.commands} commands in ${(result.ms / 1000).toFixed(1)} s`,
  pglite ? undefined : schema
)
