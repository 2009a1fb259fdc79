/**
 * slowcall on Redis: a worker, a sweeper and a client on the machine's Redis (REDIS_URL, default
 * redis://127.0.0.1:6379), keys under the prefix `example`.
 *
 * A fake billed model call fails its first try with an HTTP 500 (the job retries and succeeds); a job whose
 * handler meets a permanent error becomes a dead letter, with its spend; the dead-letter view groups it by error
 * class and input; then everything this run made is purged, so the example leaves nothing behind but its queues'
 * counters.
 *
 * Run: npx tsx examples/redis-worker.ts
 */
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Schema, Stream } from "effect"

const calls = new Map<string, number>()
const fakeModel = (text: string) =>
  Effect.gen(function* () {
    const call = (calls.get(text) ?? 0) + 1
    calls.set(text, call)
    yield* Effect.sleep("20 millis")
    if (text.includes("forbidden")) return yield* Effect.fail({ status: 401, message: "bad key" })
    if (call === 1) return yield* Effect.fail({ status: 500, message: "upstream error" })
    return { summary: text.slice(0, 12), cents: 2 }
  })

const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ summary: Schema.String }),
  estimateCents: () => 2,
  attempt: { timeoutMs: 2_000 },
  run: (input, ctx) =>
    Effect.map(ctx.call({ estimateCents: 2, run: fakeModel(input.text), cost: (reply) => reply.cents }), (reply) => ({
      summary: reply.summary
    }))
})

const program = Effect.gen(function* () {
  const client = yield* Client.Client
  const store = yield* RedisStore.RedisStore
  const ok = yield* client.submit({ queue: "docs", type: "summarize", input: { text: "a slow call, queued" } })
  const bad = yield* client.submit({ queue: "docs", type: "summarize", input: { text: "a forbidden call" } })
  const finals = yield* Effect.forEach([ok.job.id, bad.job.id], (id) =>
    store.watch(id).pipe(Stream.runLast, Effect.flatten)
  )
  const dead = yield* client.deadLetters({ queue: "docs" })
  const purged = yield* store.purge({ queue: "docs", createdBefore: Math.max(...finals.map((j) => j.updatedAt)) + 1 })
  return { finals, dead, purged }
})

const redis = RedisStore.layer({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379", prefix: "example" })
const app = Layer.mergeAll(
  Client.layer,
  Worker.layer({ queue: "docs", concurrency: 2, handlers: [summarize], retry: { baseMs: 50, capMs: 100 } }),
  Sweeper.layer({ queue: "docs", intervalMs: 1_000 })
).pipe(Layer.provideMerge(redis))

const { dead, finals, purged } = await Effect.runPromise(
  Effect.scoped(Effect.provide(program, app)).pipe(Effect.timeout("30 seconds"))
)
for (const job of finals) {
  console.log(`${job.id}: ${job.state} after ${job.attempts} attempt(s), ${job.costCents} cents`, job.result ?? "")
}
console.log("dead-letter groups:", dead.groups)
console.log(`purged ${purged.length} finished jobs`)
const [first, second] = finals
if (first?.state !== "succeeded" || first.attempts !== 2 || second?.state !== "failed" || purged.length !== 2) {
  process.exit(1)
}
