/**
 * The layers compose one seam at a time: the Postgres Store (on PGlite, over its own `PgDriver`) with the core's
 * in-memory Transport, no PgTransport anywhere, runs a real core `Worker` end to end. A job submitted through the
 * `Client` is delivered by the memory transport, claimed, charged and settled in Postgres: it ends succeeded after
 * one attempt with its one model call's charge.
 */
import { expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Option, Schema } from "effect"
import { describe } from "vitest"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"

const QUEUE = "compose"
const CENTS = 3

describe("PgStore with the memory Transport", () => {
  it.live("a core Worker runs a Client-submitted job to success: one attempt, one model call, its charge", () => {
    const calls: Array<string> = []
    const summarize = Handler.make({
      type: "summarize",
      version: 1,
      input: Schema.Struct({ text: Schema.String }),
      result: Schema.Struct({ summary: Schema.String }),
      estimateCents: CENTS,
      attempt: { timeoutMs: 10_000 },
      run: (input, ctx) =>
        ctx.call({
          estimateCents: CENTS,
          run: Effect.sync(() => {
            calls.push(ctx.jobId)
            return { summary: input.text.slice(0, 4) }
          }),
          cost: () => CENTS
        })
    })
    const seams = Layer.merge(PgStore.layerFromDriver(), Transport.layerMemory()).pipe(
      Layer.provideMerge(PgDriver.layerPglite())
    )
    const app = Worker.layer({ queue: QUEUE, handlers: [summarize], concurrency: 2, receiveWaitMs: 100 }).pipe(
      Layer.provideMerge(Client.layer),
      Layer.provideMerge(seams)
    )

    return Effect.gen(function* () {
      const client = yield* Client.Client
      const store = yield* PgStore.PgStore

      const { job: submitted } = yield* client.submit({ queue: QUEUE, type: "summarize", input: { text: "hello" } })
      let job = yield* store.get({ jobId: submitted.id })
      for (let i = 0; i < 200 && (job.state === "queued" || job.state === "running"); i++) {
        yield* Effect.sleep("50 millis")
        job = yield* store.get({ jobId: submitted.id })
      }

      expect(job).toMatchObject({
        state: "succeeded",
        attempts: 1,
        leaseToken: 1,
        costCents: CENTS,
        result: { summary: "hell" }
      })
      expect(calls).toEqual([submitted.id])
      const attempts = yield* store.attempts({ jobId: submitted.id })
      expect(attempts.map((attempt) => [attempt.token, attempt.outcome])).toEqual([[1, "succeeded"]])
      const charges = yield* store.charges({ jobId: submitted.id })
      expect(charges.map((charge) => [charge.token, charge.amountCents, charge.settled])).toEqual([[1, CENTS, true]])
      // The transport in use is the memory one: no PgTransport was built.
      expect(Option.isNone(yield* Effect.serviceOption(PgTransport.PgTransport))).toBe(true)
      expect((yield* Transport.Transport).capabilities.visibilityFollowsLease).toBe(false)
    }).pipe(Effect.provide(app))
  })
})
