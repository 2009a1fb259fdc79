import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as SqsTransport from "@slowcall/adapter-sqs/SqsTransport"
import * as Client from "@slowcall/core/Client"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import { Layer } from "effect"
import type { summarize } from "./handlers.js"

// #region transport
// The slowcall queue "summaries" rides on one SQS queue. Region and credentials come from the SDK's usual sources
// (environment, profile, instance role). At start the transport reads the queue's RedrivePolicy and VisibilityTimeout
// and fails with RedriveUnsafe when SQS could dead-letter a healthy job; `onUnsafe: "warn"` only logs it.
const Sqs = SqsTransport.layer({
  queues: { summaries: "https://sqs.eu-west-1.amazonaws.com/123456789012/summaries" },
  client: { region: "eu-west-1" },
  redrive: { maxAttempts: 3, leaseMs: 60_000, onUnsafe: "fail" }
})
// #endregion transport

// #region fifo
// A FIFO queue: one message group per tenant (a tenant's jobs start in order, one at a time) or per job (default);
// the deduplication id is the job id and attempt, so a publish repeated within five minutes is sent once.
export const Fifo = SqsTransport.layer({
  queues: { summaries: "https://sqs.eu-west-1.amazonaws.com/123456789012/summaries.fifo" },
  fifoGroup: "tenant"
})
// #endregion fifo

// #region postgres
// Postgres holds the jobs; SQS wakes the workers. The outbox relay publishes every committed job to SQS, including
// those enqueued inside your own transaction with PgStore.submitInTransaction.
const PgSeams = Layer.merge(PgStore.layerFromDriver({ schema: "slowcall" }), Sqs)
export const PgWithSqs = Layer.merge(
  PgSeams,
  PgStore.layerOutboxRelay({ intervalMs: 1_000 }).pipe(Layer.provide(PgSeams))
).pipe(Layer.provideMerge(PgDriver.layer({ connectionString: "postgres://app@db.internal:5432/app" })))
// #endregion postgres

// #region redis
// Redis holds the jobs; SQS wakes the workers.
export const RedisWithSqs = Layer.merge(RedisStore.layerFromConnection(), Sqs).pipe(
  Layer.provideMerge(RedisConnection.layer({ url: "redis://cache.internal:6379", prefix: "slowcall" }))
)
// #endregion redis

// #region app
// Workers long-poll for up to 20 s (an idle worker then makes three receive calls a minute), and the sweeper
// republishes any queued job whose message was lost or dead-lettered.
export const app = (handlers: ReadonlyArray<typeof summarize>) =>
  Layer.mergeAll(
    Client.layer,
    Worker.layer({ queue: "summaries", handlers, concurrency: 16, receiveWaitMs: 20_000 }),
    Sweeper.layer({ queue: "summaries", intervalMs: 5_000, republishAfterMs: 60_000 })
  ).pipe(Layer.provideMerge(PgWithSqs))
// #endregion app
