/**
 * What the Store, the Query and the Transport share over one connection: the client, the key builder, the
 * retention of finished jobs' data, and the route from job id to queue.
 *
 * Routes: every key of a job carries its queue's hash tag, so a verb that names only job ids (claim, heartbeat,
 * charge, settle, cancel, replay, get) must learn each job's queue first. Submit writes `id -> queue` into one of
 * `ROUTE_BUCKETS` small hashes (chosen by the id) before the job exists, and a job never changes queue, so a route
 * read once is cached for the life of the process (bounded, oldest dropped first); the jobs a script returns and
 * the deliveries a transport hands out fill the cache too. A route without its job (a submit that failed after the
 * route was written) only ever answers "no such job".
 *
 * @internal
 */
import { StoreError } from "@slowcall/core/Errors"
import { Effect } from "effect"
import { Cluster } from "ioredis"
import { toStoreError } from "./errors.js"
import { type Events, make as makeEvents } from "./events.js"
import { guarded } from "./guard.js"
import type { Keys } from "./keys.js"
import * as KeysModule from "./keys.js"
import { type Client, run, type ScriptName } from "./scripts.js"

/** @internal */
export interface Context {
  readonly client: Client
  readonly keys: Keys
  /** How long a finished (succeeded or abandoned) job's input and result are kept; null keeps them. */
  readonly retentionMs: number | null
  readonly routes: Routes
  /** Whether the client is a Cluster client (a single server allows a submit's routes and script in one write). */
  readonly cluster: boolean
  /** The queues' write events (one subscriber connection, made on first use). */
  readonly events: Events
}

/** The route cache and its reads and writes. @internal */
export interface Routes {
  /** The queue of every id that has a route (missing ids have none: no such job). */
  readonly resolve: (operation: string, ids: ReadonlyArray<string>) => Effect.Effect<Map<string, string>, StoreError>
  /** Remembers a route learnt from a reply. */
  readonly learn: (jobId: string, queue: string) => void
  /** Writes routes before a submit; fails with `Constraint` (writing nothing) when an id has one already. */
  readonly reserve: (
    operation: string,
    items: ReadonlyArray<{ readonly id: string; readonly queue: string }>
  ) => Effect.Effect<void, StoreError>
  /**
   * After a submit that wrote its routes beside the script (`HSETNX` found some taken): takes over the routes that
   * are orphans of failed submits or already name `queue`, and returns the first id whose route names another
   * queue that holds a job with that id (a clash), or undefined.
   */
  readonly claimRoutes: (
    operation: string,
    queue: string,
    items: ReadonlyArray<{ readonly id: string }>
  ) => Effect.Effect<string | undefined, StoreError>
  /** Takes back routes `reserve` wrote, when the submit they were for did not create the jobs. */
  readonly release: (items: ReadonlyArray<{ readonly id: string; readonly queue: string }>) => Effect.Effect<void>
  /** Adds a queue to the set of queues (once per process), for the verbs and reads that span every queue. */
  readonly register: (operation: string, queue: string) => Effect.Effect<void, StoreError>
  /** Every queue ever submitted to. */
  readonly queues: (operation: string) => Effect.Effect<ReadonlyArray<string>, StoreError>
}

const CACHE_LIMIT = 100_000

/**
 * One command (or a few) of `client` as an Effect, its failure a `StoreError`.
 *
 * @internal
 */
export const attempt = <A>(
  client: Client,
  operation: string,
  write: boolean,
  f: () => Promise<A>
): Effect.Effect<A, StoreError> =>
  Effect.tryPromise({ try: () => guarded(client, f), catch: (error) => toStoreError(operation, error, write) })

/**
 * The route cache over `client`.
 *
 * @internal
 */
export const makeRoutes = (client: Client, keys: Keys): Routes => {
  const cache = new Map<string, string>()
  const registered = new Set<string>()
  const learn = (jobId: string, queue: string) => {
    if (cache.has(jobId)) return
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!)
    cache.set(jobId, queue)
  }
  const byBucket = (ids: ReadonlyArray<string>): Map<string, Array<string>> => {
    const buckets = new Map<string, Array<string>>()
    for (const id of ids) {
      const key = keys.route(id)
      const list = buckets.get(key)
      if (list === undefined) buckets.set(key, [id])
      else list.push(id)
    }
    return buckets
  }
  return {
    learn,
    resolve: (operation, ids) =>
      Effect.suspend(() => {
        const found = new Map<string, string>()
        const missing: Array<string> = []
        for (const id of ids) {
          const queue = cache.get(id)
          if (queue !== undefined) found.set(id, queue)
          else if (!missing.includes(id)) missing.push(id)
        }
        if (missing.length === 0) return Effect.succeed(found)
        return attempt(client, operation, false, () =>
          Promise.all(
            [...byBucket(missing)].map(async ([key, bucketIds]) => {
              const queues = await client.hmget(key, ...bucketIds)
              bucketIds.forEach((id, i) => {
                const queue = queues[i]
                if (queue != null) {
                  found.set(id, queue)
                  learn(id, queue)
                }
              })
            })
          )
        ).pipe(Effect.as(found))
      }),
    reserve: (operation, items) =>
      Effect.gen(function* () {
        const outcomes = yield* attempt(client, operation, true, () =>
          Promise.all(items.map((item) => client.hsetnx(keys.route(item.id), item.id, item.queue)))
        )
        const taken = items.filter((_, i) => outcomes[i] === 0)
        if (taken.length === 0) {
          for (const item of items) learn(item.id, item.queue)
          return
        }
        const mine = items.filter((_, i) => outcomes[i] === 1)
        yield* Effect.promise(() =>
          Promise.all(mine.map((item) => client.hdel(keys.route(item.id), item.id))).catch(() => undefined)
        )
        return yield* new StoreError({
          reason: "Constraint",
          operation,
          detail: `job id ${taken[0]!.id} already exists`
        })
      }),
    claimRoutes: (operation, queue, items) =>
      attempt(client, operation, true, async () => {
        for (const item of items) {
          const owner = await client.hget(keys.route(item.id), item.id)
          if (owner === null || owner === queue) {
            if (owner === null) await client.hset(keys.route(item.id), item.id, queue)
            continue
          }
          if ((await client.exists(keys.job(owner, item.id))) === 1) return item.id
          await client.hset(keys.route(item.id), item.id, queue)
        }
        return undefined
      }),
    release: (items) =>
      Effect.promise(() =>
        Promise.all(items.map((item) => client.hdel(keys.route(item.id), item.id))).catch(() => undefined)
      ).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            for (const item of items) cache.delete(item.id)
          })
        ),
        Effect.asVoid
      ),
    register: (operation, queue) =>
      registered.has(queue)
        ? Effect.void
        : attempt(client, operation, true, () => client.sadd(keys.queues, queue)).pipe(
            Effect.tap(() => Effect.sync(() => registered.add(queue))),
            Effect.asVoid
          ),
    queues: (operation) => attempt(client, operation, false, () => client.smembers(keys.queues))
  }
}

/**
 * Runs a script of `queue` (its meta hash is the one declared key).
 *
 * @internal
 */
export const script = (
  ctx: Context,
  operation: string,
  name: ScriptName,
  queue: string,
  args: ReadonlyArray<string>,
  write: boolean
): Effect.Effect<unknown, StoreError> =>
  attempt(ctx.client, operation, write, () => run(ctx.client, name, [ctx.keys.meta(queue)], args))

/**
 * Store time now: the server's `TIME` in whole epoch ms, the scripts' `storeNow` rule (lua/includes/base.lua says
 * why whole).
 *
 * @internal
 */
export const serverNow = (ctx: Context, operation = "now"): Effect.Effect<number, StoreError> =>
  attempt(ctx.client, operation, false, () => ctx.client.time()).pipe(
    Effect.map(([seconds, micros]) => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000))
  )

/** The default retention of finished jobs' input and result: 7 days. @internal */
export const DEFAULT_DATA_RETENTION_MS = 7 * 24 * 3_600_000

/** One context per connection service and retention, so a Store and a Transport on one connection share routes. */
const contexts = new WeakMap<object, Map<number | null, Context>>()
const shared = new WeakMap<object, { readonly routes: Routes; readonly events: Events }>()

/**
 * The adapter's context over a connection (`undefined` retention: the default).
 *
 * @internal
 */
export const contextOf = (
  connection: { readonly client: Client; readonly prefix: string },
  dataRetentionMs: number | null | undefined
): Context => {
  const retentionMs = dataRetentionMs === undefined ? DEFAULT_DATA_RETENTION_MS : dataRetentionMs
  let byRetention = contexts.get(connection)
  if (byRetention === undefined) contexts.set(connection, (byRetention = new Map()))
  const known = byRetention.get(retentionMs)
  if (known !== undefined) return known
  const keys = KeysModule.make(connection.prefix)
  let parts = shared.get(connection)
  if (parts === undefined) {
    parts = { routes: makeRoutes(connection.client, keys), events: makeEvents(connection.client, keys) }
    shared.set(connection, parts)
  }
  const made: Context = {
    client: connection.client,
    keys,
    retentionMs,
    routes: parts.routes,
    events: parts.events,
    cluster: connection.client instanceof Cluster
  }
  byRetention.set(retentionMs, made)
  return made
}

/**
 * Closes what the contexts of a connection opened besides the client (the subscriber connection).
 *
 * @internal
 */
export const release = (connection: object): Effect.Effect<void> => {
  const parts = shared.get(connection)
  return parts === undefined ? Effect.void : parts.events.close
}
