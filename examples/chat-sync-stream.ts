/**
 * A chat endpoint that stays synchronous and streams, and knows when it should not. It streams one reply token by
 * token, then feeds the latencies it observes into the decision rule: with a healthy provider the p99 (including a
 * retry after a timeout) is well under half of the platform's 60 s timeout, so streaming inline is right; on a
 * bad day the tail grows past T/2 and the same check says to move the call to a job.
 *
 * Run: npx tsx examples/chat-sync-stream.ts
 */
import * as Decide from "@slowcall/core/Decide"
import { Chunk, Effect, Either, Random, Stream } from "effect"
import * as Model from "./lib/simulatedModel.js"

const hops: ReadonlyArray<Decide.Hop> = [
  { name: "platform", timeoutMs: 60_000 },
  { name: "browser", timeoutMs: 300_000 }
]
const policy = { timeoutMs: 20_000, retries: 1, backoffMs: 500 }

/** The endpoint: stream the reply's tokens as they are generated (here: a word every 15 ms). */
const chat = (message: string): Stream.Stream<string> =>
  Stream.fromIterable(`You asked: "${message}". Short answer: yes, stream it while it stays fast.`.split(" ")).pipe(
    Stream.tap(() => Effect.sleep(15)),
    Stream.map((word) => `${word} `)
  )

/** Latencies of single attempts as the endpoint would log them, drawn from the provider's behaviour. */
const observe = (provider: Model.ModelOptions, n: number) =>
  Effect.forEach(Array.from({ length: n }), () => Model.drawLatency(provider))

const check = (label: string, provider: Model.ModelOptions) =>
  Effect.gen(function* () {
    const samples = yield* observe(provider, 2_000)
    const effective = Decide.effectiveP99({ samples, ...policy, seed: 42 })
    if (Either.isLeft(effective)) return yield* Effect.fail(effective.left)
    const decision = Decide.decide({
      p99Ms: effective.right.p99Ms,
      hops,
      userWaiting: true,
      outlivesSession: false,
      resultNeededNow: true
    })
    if (Either.isLeft(decision)) return yield* Effect.fail(decision.left)
    const d = decision.right
    console.log(`\n${label}`)
    console.log(
      `  single attempts: p50 ${Decide.formatDuration(Decide.percentile(samples, 0.5))}, ` +
        `p99 ${Decide.formatDuration(Decide.percentile(samples, 0.99))}`
    )
    console.log(
      `  with a ${Decide.formatDuration(policy.timeoutMs)} timeout and ${policy.retries} retry: ` +
        `effective p99 ${Decide.formatDuration(effective.right.p99Ms)}`
    )
    console.log(`  decision: ${d.mode} (${d.rule}), margin to T/2 ${Decide.formatDuration(d.marginMs)}`)
    console.log(`  ${d.reasons[0]}`)
    return d
  })

const program = Effect.gen(function* () {
  process.stdout.write("POST /chat (streaming): ")
  const tokens = yield* chat("should this call be a job?").pipe(
    Stream.tap((token) => Effect.sync(() => process.stdout.write(token))),
    Stream.runCollect
  )
  console.log(`\n  ${Chunk.size(tokens)} tokens streamed`)

  const healthy = yield* check("a normal day", { medianMs: 3_000, tailRate: 0.02, tailFactor: 3, centsPerCall: 0.3 })
  const degraded = yield* check("a bad day (the provider's tail grows)", {
    medianMs: 9_000,
    tailRate: 0.1,
    tailFactor: 5,
    centsPerCall: 0.3
  })

  if (healthy.mode !== "sync-stream" || degraded.mode !== "async") {
    return yield* Effect.fail(new Error("expected sync-stream on a normal day and async on a bad one"))
  }
  console.log("\nswitch: on days like this, submit a job and stream progress from the job record instead")
})

Effect.runPromise(program.pipe(Effect.withRandom(Random.make("chat-example")))).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
