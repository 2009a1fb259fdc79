/**
 * The one small interface every statement of the adapter runs through, with two implementations: a node-postgres
 * `Pool` (a server) and PGlite in process (embedded, optionally with a data directory on disk).
 *
 * Drivers speak promises and raw driver errors; `errors.ts` turns those into `StoreError` in one place.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import { PGlite } from "@electric-sql/pglite"
import pg from "pg"

/**
 * Anything that runs one statement with positional parameters and returns its rows. A node-postgres client or
 * pool and a PGlite instance or transaction all fit, which is what lets `submitInTransaction` run inside the
 * caller's own transaction.
 *
 * @internal
 */
export interface SqlClient {
  readonly query: (text: string, params?: Array<unknown>) => Promise<{ readonly rows: ReadonlyArray<unknown> }>
}

/** @internal */
export interface Queryable {
  /** One statement with `$n` parameters. */
  readonly query: <R = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>) => Promise<Array<R>>
  /** A script of several statements without parameters (migrations). */
  readonly exec: (text: string) => Promise<void>
}

/** @internal */
export interface Driver extends Queryable {
  readonly kind: "pg" | "pglite"
  /** Runs `fn` inside BEGIN/COMMIT on one connection; ROLLBACK when it throws. */
  readonly transaction: <A>(fn: (tx: Queryable) => Promise<A>) => Promise<A>
  /** Subscribes to a notification channel; resolves to the unsubscribe function. */
  readonly listen: (channel: string, onPayload: (payload: string) => void) => Promise<() => Promise<void>>
  readonly close: () => Promise<void>
}

/** @internal */
export interface PgDriverOptions {
  readonly connectionString?: string | undefined
  readonly pool?: pg.Pool | undefined
  readonly max?: number | undefined
  /** Client-side limit for one statement; without it a blackholed connection hangs forever. */
  readonly queryTimeoutMs?: number | undefined
  readonly connectionTimeoutMs?: number | undefined
  /** Lower bound of the LISTEN connection's reconnect delay. */
  readonly listenRetryMs?: number | undefined
}

const ignoreClientError = (): void => {}

const guarded = new WeakSet<object>()

/** Every client gets an error listener once: a socket that dies while idle or checked out must not crash Node. */
const guard = (client: pg.ClientBase): void => {
  if (guarded.has(client)) return
  guarded.add(client)
  client.on("error", ignoreClientError)
}

/**
 * The session settings of every connection of a pool the driver creates, in the startup message's `options` (as
 * `PGOPTIONS` would give them): the server applies them as the session starts, with no statement of their own. (Sent
 * as a first statement on `connect`, they ran while the pool's first query was sent on the same client, which
 * node-postgres warns of as deprecated.) An `options` parameter in the connection string replaces them.
 *
 * `jit = off`: the protocol's statements are short index walks, but the planner prices a claim by how many rows it
 * expects to pass over, which grows with the table; past `jit_above_cost` (100,000 by default, reached near a million
 * queued jobs) the server compiles every claim with LLVM first. Measured on PostgreSQL 15 with 1,000,000 jobs queued
 * (7 December 2026), the claim's pick, run again and again in one session: 14 ms with JIT (13.5 ms of it compiling),
 * 0.3 ms without; the peer harness's W4 took 1.77 times as long for 2,000 jobs behind a backlog of 1,000,000 as behind
 * 1,000 with JIT on, and 0.79 times with it off (the benchmarks page, "W4 behind a million jobs").
 *
 * `random_page_cost = 1.1`: what the adapter's statements read (the entries at the head of an order, the rows of the
 * jobs in hand) is in the server's cache, where a read by key costs about what a sequential one does; the default (4)
 * prices it for a spinning disk. On tables without statistics (the first minute after a burst into a fresh schema,
 * or a server with autovacuum off) the default made the planner read a claim's every due entry and sort them instead
 * of walking the claim order, and scan the whole of `jobs` for a settlement's rows instead of finding each by its key:
 * measured with 10,000 fresh jobs (7 December 2026), a claim of 512 took 35 ms, 17 ms with this setting, and a
 * settlement of 256 13.2 ms, 11.1 ms with it. With statistics it matters as much for a table of that size: the
 * settlement of 256 scanned `jobs` three times and `attempts` once by the default, 92 ms, against 15 ms by key.
 *
 * @internal
 */
export const sessionOptions = "-c jit=off -c random_page_cost=1.1"

/**
 * The settings of a PGlite database the driver opens, run once as it opens (PGlite compiles no JIT): see
 * `sessionOptions`.
 */
const pgliteSettings = "SET random_page_cost = 1.1"

/**
 * Statements with parameters run as named prepared statements: node-postgres prepares each once per connection,
 * so the server parses and plans the (long) protocol statements once instead of on every call.
 */
const statementName = (text: string): string => {
  let name = statementNames.get(text)
  if (name === undefined) {
    name = `slowcall_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`
    if (statementNames.size < statementNameLimit) statementNames.set(text, name)
  }
  return name
}

/**
 * The names already computed, by text: the protocol statements are a few fixed texts run on every call, and hashing
 * a several-kilobyte text each time cost more than the rest of the call's own work. Bounded, for texts built per call.
 */
const statementNames = new Map<string, string>()
const statementNameLimit = 1_000

const pgQueryable = (client: pg.ClientBase | pg.Pool): Queryable => ({
  query: async <R>(text: string, params?: ReadonlyArray<unknown>) => {
    const result =
      params === undefined || params.length === 0
        ? await client.query(text)
        : await client.query({ name: statementName(text), text, values: [...params] })
    return result.rows as Array<R>
  },
  exec: async (text: string) => {
    await client.query(text)
  }
})

/**
 * node-postgres over a Pool. Owns the pool (and ends it on close) unless one was passed in.
 *
 * @internal
 */
export const makePgDriver = (options: PgDriverOptions): Driver => {
  const owned = options.pool === undefined
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString,
      options: sessionOptions,
      max: options.max ?? 10,
      query_timeout: options.queryTimeoutMs ?? 30_000,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000
    })
  pool.on("error", ignoreClientError)
  pool.on("connect", guard)
  const base = pgQueryable(pool)
  const listeners = new Set<pg.Client>()
  let closed = false
  return {
    kind: "pg",
    ...base,
    transaction: async (fn) => {
      const client = await pool.connect()
      guard(client)
      let failure: unknown
      try {
        await client.query("BEGIN")
        const value = await fn(pgQueryable(client))
        await client.query("COMMIT")
        return value
      } catch (error) {
        failure = error
        await client.query("ROLLBACK").catch(ignoreClientError)
        throw error
      } finally {
        client.release(failure instanceof Error ? failure : undefined)
      }
    },
    listen: async (channel, onPayload) => {
      let current: pg.Client | undefined
      let stopped = false
      const retryMs = options.listenRetryMs ?? 250
      /** One try at a listening connection; false (and nothing left open) when the server cannot be reached. */
      const connectOnce = async (): Promise<boolean> => {
        const client = new pg.Client(
          options.pool !== undefined
            ? (options.pool as unknown as { options: pg.ClientConfig }).options
            : {
                connectionString: options.connectionString,
                connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000
              }
        )
        client.on("error", ignoreClientError)
        try {
          await client.connect()
          await client.query(`LISTEN "${channel.replaceAll('"', '""')}"`)
          client.on("notification", (message) => {
            if (message.channel === channel) onPayload(message.payload ?? "")
          })
          client.on("end", () => {
            listeners.delete(client)
            if (!stopped && !closed) void reconnectLater()
          })
          if (stopped || closed) {
            await client.end().catch(ignoreClientError)
            return true
          }
          current = client
          listeners.add(client)
          return true
        } catch {
          await client.end().catch(ignoreClientError)
          return false
        }
      }
      const connect = async (): Promise<void> => {
        while (!stopped && !closed) {
          if (await connectOnce()) return
          await new Promise((resolve) => setTimeout(resolve, retryMs))
        }
      }
      const reconnectLater = async (): Promise<void> => {
        await new Promise((resolve) => setTimeout(resolve, retryMs))
        await connect()
      }
      // One try before returning: a server that cannot be reached now must not hold up whoever listens (the store
      // fails on its own queries; the transport polls); the tries go on in the background until one succeeds.
      if (!(await connectOnce())) void reconnectLater()
      return async () => {
        stopped = true
        if (current !== undefined) {
          listeners.delete(current)
          await current.end().catch(ignoreClientError)
        }
      }
    },
    close: async () => {
      closed = true
      await Promise.all([...listeners].map((client) => client.end().catch(ignoreClientError)))
      listeners.clear()
      if (owned) await pool.end()
    }
  }
}

const pgliteQueryable = (db: Pick<PGlite, "query" | "exec">): Queryable => ({
  query: async <R>(text: string, params?: ReadonlyArray<unknown>) => {
    const result = await db.query<R>(text, params === undefined ? [] : [...params])
    return result.rows
  },
  exec: async (text: string) => {
    await db.exec(text)
  }
})

/**
 * PGlite in process. `dataDir` keeps the database on disk; without it the database lives in memory. PGlite
 * runs one backend, so its statements are serialised; notifications are delivered in process.
 *
 * @internal
 */
export const makePgliteDriver = async (options: {
  readonly dataDir?: string | undefined
  readonly db?: PGlite | undefined
}): Promise<Driver> => {
  const owned = options.db === undefined
  const db = options.db ?? (options.dataDir === undefined ? new PGlite() : new PGlite(options.dataDir))
  await db.waitReady
  // A database passed in is the caller's: its session keeps its own settings.
  if (owned) await db.exec(pgliteSettings)
  return {
    kind: "pglite",
    ...pgliteQueryable(db),
    transaction: (fn) => db.transaction((tx) => fn(pgliteQueryable(tx))),
    listen: async (channel, onPayload) => {
      const unsubscribe = await db.listen(channel, onPayload)
      return () => unsubscribe()
    },
    close: async () => {
      if (owned && !db.closed) await db.close()
    }
  }
}

/**
 * Wraps a caller's client (node-postgres client or pool, PGlite instance or transaction) so the adapter's
 * statements can run on it.
 *
 * @internal
 */
export const fromSqlClient = (client: SqlClient): Queryable => ({
  query: async <R>(text: string, params?: ReadonlyArray<unknown>) => {
    const result = await client.query(text, params === undefined ? [] : [...params])
    return result.rows as Array<R>
  },
  exec: async (text: string) => {
    await client.query(text)
  }
})
