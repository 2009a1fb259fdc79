/**
 * Where the Promise examples keep their jobs: the machine's Postgres (`DATABASE_URL`, default the local test
 * database) under a schema of their own, dropped when the example ends, so runs never see each other's jobs.
 */
import { randomUUID } from "node:crypto"
import pg from "pg"

/** The database URL the examples use. */
export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** A schema name no other run uses. */
export const uniqueSchema = (example: string): string =>
  `ex_${example}_${randomUUID().replaceAll("-", "").slice(0, 10)}`

/** Drop this run's own schema (and only it). */
export const dropSchema = async (schema: string): Promise<void> => {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}
