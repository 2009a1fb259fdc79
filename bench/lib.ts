/**
 * The slowcall modules the benchmark adapters drive, in one entry: `bench/slowcall.mjs` and
 * `bench/slowcall-redis.mjs` import a bundle of it (scripts/bundle.mjs), the compiled code a user's build would ship,
 * rather than the TypeScript sources through a loader that compiles them in the measured process.
 */

export * as PgStatements from "../packages/adapter-postgres/src/internal/statements.js"
export * as PgStore from "../packages/adapter-postgres/src/PgStore.js"
export * as RedisStore from "../packages/adapter-redis/src/RedisStore.js"
export * as Canonical from "../packages/core/src/Canonical.js"
export * as Client from "../packages/core/src/Client.js"
export * as Handler from "../packages/core/src/Handler.js"
export * as Ids from "../packages/core/src/Ids.js"
export * as Lease from "../packages/core/src/Lease.js"
export * as Limiter from "../packages/core/src/Limiter.js"
export * as Store from "../packages/core/src/Store.js"
export * as Worker from "../packages/core/src/Worker.js"
