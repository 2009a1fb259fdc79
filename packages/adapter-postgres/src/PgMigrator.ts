/**
 * Forward-only migrations for the Postgres adapter, safe to run from several processes at once.
 *
 * Each migration runs in its own transaction that first takes `pg_advisory_xact_lock` on the schema, then inserts
 * the migration's row into `<schema>.migrations` and only then runs the file. A second process waits on the lock,
 * finds the row already there and skips the file; a failed file rolls back together with its row.
 *
 * @since 0.1.0
 */
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { StoreError } from "@slowcall/core/Errors"
import { Effect } from "effect"
import type { Driver, Queryable } from "./internal/driver.js"
import { toStoreError } from "./internal/errors.js"
import { quoteSchema } from "./internal/statements.js"

/**
 * One migration file: `version` from the `NNNN_` prefix, `name` the rest, `sql` with `__SCHEMA__` placeholders.
 * Versions are unique and applied in increasing order; a file is never edited once released.
 *
 * @since 0.1.0
 * @category models
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

const MIGRATIONS_DIR = fileURLToPath(new URL("../migrations/", import.meta.url))

/**
 * The migrations shipped with the package, in version order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const migrations = (): ReadonlyArray<Migration> =>
  readdirSync(MIGRATIONS_DIR)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      sql: readFileSync(`${MIGRATIONS_DIR}${file}`, "utf8")
    }))

/**
 * Which migrations a run applied (empty when the schema was already current).
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrateResult {
  readonly schema: string
  readonly applied: ReadonlyArray<number>
}

const LOCK_CLASS = 0x5c4c

const applyOne = async (tx: Queryable, schema: string, migration: Migration): Promise<boolean> => {
  const s = quoteSchema(schema)
  await tx.query("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [LOCK_CLASS, schema])
  await tx.exec(`CREATE SCHEMA IF NOT EXISTS ${s};
    CREATE TABLE IF NOT EXISTS ${s}.migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`)
  const inserted = await tx.query(
    `INSERT INTO ${s}.migrations (version, name) VALUES ($1::int, $2) ON CONFLICT (version) DO NOTHING RETURNING version`,
    [migration.version, migration.name]
  )
  if (inserted.length === 0) return false
  await tx.exec(migration.sql.replaceAll("__SCHEMA__", s))
  return true
}

/**
 * Brings `schema` up to date. Running it again, or from two processes at once, applies each migration exactly once
 * and leaves one correct schema.
 *
 * @since 0.1.0
 * @category combinators
 */
export const migrate = (
  driver: Driver,
  options: { readonly schema?: string | undefined; readonly migrations?: ReadonlyArray<Migration> | undefined } = {}
): Effect.Effect<MigrateResult, StoreError> => {
  const schema = options.schema ?? "slowcall"
  return Effect.tryPromise({
    try: async () => {
      quoteSchema(schema)
      const applied: Array<number> = []
      for (const migration of options.migrations ?? migrations()) {
        if (await driver.transaction((tx) => applyOne(tx, schema, migration))) applied.push(migration.version)
      }
      return { schema, applied }
    },
    catch: (error) => toStoreError("migrate", error)
  })
}
