// What the fleet benchmarks share (bench/fairness.mjs, bench/w7-tokens.mjs). Each runs as an orchestrator: it starts a
// fake provider on 127.0.0.1 (a random port) that answers from token buckets, prepares a store with nothing in it (on
// Postgres a database of its own, dropped and created again; on Redis a key prefix of its own, its keys deleted before
// and after), forks worker processes of its own script (`--worker`, their settings as JSON in one environment
// variable), each running one `Worker.make` on the store until told to stop, submits jobs, and reads the provider's
// records. The workspace code is imported from a bundle of bench/lib.ts (scripts/bundle.mjs).
import { fork } from "node:child_process"
import http from "node:http"
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const PG_URL_BASE = process.env.SLOWCALL_BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432"
const REDIS_URL = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"

/** Wall-clock milliseconds, finer than `Date.now()`. */
export const nowMs = () => performance.timeOrigin + performance.now()

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** `--name value` pairs as `{ name: "value" }`; a `--name` not followed by a value is `true`. */
export const parseArgs = (argv) => {
  const out = {}
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]
    if (!name.startsWith("--")) continue
    const next = argv[i + 1]
    if (next === undefined || next.startsWith("--")) out[name.slice(2)] = true
    else out[name.slice(2)] = argv[++i]
  }
  return out
}

/** Effect and the workspace's modules (bench/lib.ts), as one object. */
export const loadLib = async () => {
  const [effect, lib] = await Promise.all([
    import("effect"),
    bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href))
  ])
  return { ...effect, ...lib }
}

/** Seeded uniform draws in [0, 1) (mulberry32), so runs that are compared send the same calls. */
export const uniform = (seed) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------------------------------------------

/**
 * The Store layer of a backend: Postgres on `database` (a pool of `poolMax` connections), or Redis under `prefix`.
 * @param {"postgres" | "redis"} backend
 * @param {{ database: string, poolMax: number, prefix: string, migrate: boolean }} options
 */
const storeLayer = async (lib, backend, { database, poolMax, prefix, migrate }) => {
  if (backend === "postgres") {
    // The adapter makes its own pool (with its session settings: JIT off), as the package README sets it up.
    const connectionString = `${PG_URL_BASE}/${database}`
    return { layer: lib.PgStore.layer({ connectionString, max: poolMax, migrate }), close: async () => {} }
  }
  return { layer: lib.RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false }), close: async () => {} }
}

const recreateDatabase = async (database) => {
  const pg = (await import("pg")).default
  const admin = new pg.Client({ connectionString: `${PG_URL_BASE}/postgres` })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${database}"`)
  } finally {
    await admin.end()
  }
}

/** Deletes the keys under `prefix` (SCAN + UNLINK; never a whole database). */
const dropRedisKeys = async (prefix) => {
  const { Redis } = await import("ioredis")
  const redis = new Redis(REDIS_URL)
  try {
    let cursor = "0"
    for (let round = 0; round < 100_000; round++) {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
      if (keys.length > 0) await redis.unlink(...keys)
      cursor = next
      if (cursor === "0") break
    }
  } finally {
    redis.disconnect()
  }
}

/**
 * The orchestrator's store, empty and migrated: `run` runs an effect with the Store's services, `client` submits, and
 * `close` releases the layer (on Redis it also deletes the prefix's keys).
 * @param {"postgres" | "redis"} backend
 * @param {{ database: string, poolMax: number, prefix: string }} options
 */
export const openStore = async (lib, backend, options) => {
  const { Effect, Layer, Scope, Exit } = lib
  if (backend === "postgres") await recreateDatabase(options.database)
  else await dropRedisKeys(options.prefix)
  const { layer, close } = await storeLayer(lib, backend, { ...options, migrate: true })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const run = (effect) => Effect.runPromise(Effect.provide(effect, context))
  const client = await run(lib.Client.make)
  return {
    run,
    client,
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await close()
      if (backend === "redis") await dropRedisKeys(options.prefix)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Worker processes
// ---------------------------------------------------------------------------------------------------------------

/**
 * The worker process: runs `worker` (a `Worker.make`, scoped) on the backend's store, says "ready" to the orchestrator,
 * and on "stop" closes the worker's scope (running handlers finish) and the store, then exits.
 * @param {"postgres" | "redis"} backend
 * @param {{ database: string, poolMax: number, prefix: string }} options
 */
export const serveWorker = async (lib, backend, options, worker) => {
  const { Effect, Layer, Scope, Exit } = lib
  const { layer, close } = await storeLayer(lib, backend, { ...options, migrate: false })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  await Effect.runPromise(Scope.extend(worker, scope).pipe(Effect.provide(context)))
  process.send?.("ready")
  process.on("message", async (message) => {
    if (message !== "stop") return
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await close()
    process.exit(0)
  })
}

/**
 * Forks `count` worker processes of `script` (`--worker`, `settings` as JSON in the environment variable `variable`)
 * and resolves when every one is ready.
 */
export const forkWorkers = async (script, count, variable, settings) => {
  const workers = []
  for (let i = 0; i < count; i++) {
    workers.push(
      fork(new URL(script).pathname, ["--worker"], {
        env: { ...process.env, [variable]: JSON.stringify(settings) },
        stdio: ["ignore", "inherit", "inherit", "ipc"]
      })
    )
  }
  await Promise.all(workers.map((child) => new Promise((resolve) => child.once("message", resolve))))
  return workers
}

/** Tells every worker to stop and waits for it to exit (killed after 15 s). */
export const stopWorkers = (workers) =>
  Promise.all(
    workers.map(
      (child) =>
        new Promise((resolve) => {
          child.once("exit", resolve)
          child.send("stop")
          setTimeout(() => child.kill("SIGKILL"), 15_000).unref()
        })
    )
  )

// ---------------------------------------------------------------------------------------------------------------
// The fake provider
// ---------------------------------------------------------------------------------------------------------------

/** A bucket of `perMinute` refilled continuously, holding one second's worth (at least 1). */
export const bucket = (perMinute) => {
  const perMs = perMinute / 60_000
  const capacity = Math.max(1, perMinute / 60)
  let level = capacity
  let at = nowMs()
  const refill = (t) => {
    level = Math.min(capacity, level + (t - at) * perMs)
    at = t
  }
  return {
    /** Ms until the bucket holds `amount` (0: it does now). */
    waitFor: (t, amount) => {
      refill(t)
      return level >= Math.min(amount, capacity) ? 0 : (Math.min(amount, capacity) - level) / perMs
    },
    take: (amount) => {
      level -= amount
    },
    giveBack: (t, amount) => {
      refill(t)
      level = Math.min(capacity, level + amount)
    }
  }
}

/** The 429 a provider answers at once: `retry-after` in whole seconds, `waitMs` rounded up, at least 1. */
export const rateLimited = (res, waitMs) => {
  res.writeHead(429, {
    "retry-after": String(Math.max(1, Math.ceil(waitMs / 1_000))),
    "content-type": "application/json"
  })
  res.end('{"error":{"type":"rate_limit_error"}}')
}

/** What an SDK throws for an answer that is not a 200: its status and `retry-after`, as the Limiter reads them. */
export const providerError = (res) =>
  Object.assign(new Error(`${res.status} from the provider`), {
    status: res.status,
    headers: { "retry-after": res.headers.get("retry-after") ?? undefined }
  })

/** The call time a request names (`ms`), in ms. */
export const callMsOf = (params) => Math.max(0, Number(params.get("ms")) || 0)

/**
 * Serves `onRequest(at, params, res)` on 127.0.0.1 at a random port (`at`: when the request came, `params`: its query).
 * Resolves with the provider's `url` and `close`.
 */
export const serveProvider = (onRequest) => {
  const server = http.createServer((req, res) => {
    const at = nowMs()
    const url = new URL(req.url, "http://provider")
    req.resume()
    onRequest(at, url.searchParams, res)
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(done)
          })
      })
    )
  )
}
