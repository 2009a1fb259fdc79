/**
 * Embeddings on upload: async enrichment. The upload answers at once with a job id; a worker computes the
 * embedding in the background, retrying rate limits with backoff, and the job record carries the result and its
 * cost. The decision rule agrees: the result is needed, but not now.
 *
 * Run: npx tsx examples/embeddings-on-upload.ts
 */
import * as Client from "@slowcall/core/Client"
import * as Decide from "@slowcall/core/Decide"
import * as Handler from "@slowcall/core/Handler"
import type { Job } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Clock, Effect, Either, Layer, Random, Schema, Stream } from "effect"
import * as Model from "./lib/simulatedModel.js"

const model: Model.ModelOptions = {
  medianMs: 60,
  tailRate: 0.05,
  tailFactor: 4,
  rateLimitRate: 0.25,
  centsPerCall: 0.02
}

/** A toy embedding: a deterministic vector from the text, standing in for the provider's answer. */
const embed = (text: string): Array<number> =>
  Array.from({ length: 8 }, (_, i) => {
    let h = i + 1
    for (const ch of text) h = (h * 31 + ch.charCodeAt(0)) % 10_007
    return Math.round((h / 10_007) * 1000) / 1000
  })

const embedHandler = Handler.make({
  type: "document.embed",
  version: 1,
  input: Schema.Struct({ documentId: Schema.String, text: Schema.String }),
  result: Schema.Struct({ documentId: Schema.String, vector: Schema.Array(Schema.Number) }),
  attempt: { timeoutMs: 5_000 },
  estimateCents: model.centsPerCall,
  run: (input, ctx) =>
    ctx
      .call({
        estimateCents: model.centsPerCall,
        run: Model.call(model, input.text, (text) => JSON.stringify(embed(text))),
        cost: (reply) => reply.costCents,
        // A 429 is not billed: settle the reservation at zero. Other failures keep the reservation as the record.
        costOnError: (error) => (error.status === 429 ? 0 : undefined)
      })
      .pipe(Effect.map((reply) => ({ documentId: input.documentId, vector: JSON.parse(reply.text) as Array<number> })))
})

/** The upload endpoint: store the document (elided), submit the enrichment, answer 202 with the job id. */
const upload = (documentId: string, text: string) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const started = yield* Clock.currentTimeMillis
    const { job } = yield* client.submit({
      queue: "uploads",
      type: "document.embed",
      input: { documentId, text },
      requestKey: `embed:${documentId}`,
      maxAttempts: 6,
      budgetCents: 1
    })
    const tookMs = (yield* Clock.currentTimeMillis) - started
    console.log(`POST /documents/${documentId} -> 202 { job: ${job.id} } in ${tookMs} ms`)
    return job
  })

const documents = [
  ["doc-1", "Quarterly report: revenue grew in every region."],
  ["doc-2", "Meeting notes: ship the billing migration next week."],
  ["doc-3", "Support ticket: the export button does nothing on Safari."],
  ["doc-4", "Design note: leases are sized from the worst case of one attempt."],
  ["doc-5", "Contract: the service level is 99.9% monthly."]
] as const

const program = Effect.gen(function* () {
  const decision = Decide.decide({
    p99Ms: 1_500,
    hops: [{ name: "platform", timeoutMs: 60_000 }],
    userWaiting: true,
    outlivesSession: false,
    resultNeededNow: false
  })
  if (Either.isRight(decision)) console.log(`decide: ${decision.right.mode} (${decision.right.rule})\n`)

  const client = yield* Client.Client
  const jobs = yield* Effect.forEach(documents, ([id, text]) => upload(id, text))
  // The same upload retried by the browser: same key, same input, so the same job and nothing new.
  const again = yield* upload("doc-1", documents[0][1])
  console.log(`retried upload of doc-1 returned the same job: ${again.id === jobs[0]!.id}\n`)

  const finals: Array<Job> = yield* Effect.forEach(
    jobs,
    (job) =>
      client.watch(job.id, { intervalMs: 20 }).pipe(
        Stream.runLast,
        Effect.map((last) => (last._tag === "Some" ? last.value : job))
      ),
    { concurrency: "unbounded" }
  )
  for (const job of finals) {
    const result = job.result as { readonly documentId?: string; readonly vector?: ReadonlyArray<number> } | null
    const attempts = yield* client.attempts(job.id)
    const history = attempts.map((a) => (a.errorClass === null ? a.outcome : `${a.outcome}(${a.errorClass})`))
    console.log(
      `${result?.documentId ?? job.id}: ${job.state}, attempts [${history.join(", ")}], ` +
        `cost ${job.costCents.toFixed(2)} cents, vector [${result?.vector?.slice(0, 3).join(", ") ?? ""}, ...]`
    )
  }
  const ok = finals.every((job) => job.state === "succeeded")
  console.log(ok ? "\nevery document is embedded" : "\nsome documents were not embedded")
  if (!ok) return yield* Effect.fail(new Error("not every job succeeded"))
})

const Infra = Layer.merge(Store.layerMemory, Transport.layerMemory())
const App = Layer.merge(
  Client.layer,
  // Two at a time: the worker pool is where the rate limit is respected. Short backoff for the example.
  Worker.layer({ queue: "uploads", handlers: [embedHandler], concurrency: 2, retry: { baseMs: 20, capMs: 200 } })
).pipe(Layer.provideMerge(Infra))

Effect.runPromise(program.pipe(Effect.provide(App), Effect.withRandom(Random.make("embeddings-example")))).catch(
  (error) => {
    console.error(error)
    process.exitCode = 1
  }
)
