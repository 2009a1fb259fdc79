import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as Handler from "../src/Handler.js"
import { JobId } from "../src/Job.js"

/** A handler context whose `call` records what it was given and runs the call as the worker would (minus the store). */
const context = () => {
  const given: Array<Handler.CallOptions<any, any, any>> = []
  const settled: Array<string> = []
  const ctx: Handler.HandlerContext = {
    jobId: JobId.make("0190a5d2-7c1e-7a3b-8c4d-1e2f3a4b5c6d"),
    token: 1,
    attempt: 1,
    traceId: null,
    progress: () => Effect.void,
    checkpoint: Effect.void,
    call: (options) => {
      given.push(options)
      return options.run.pipe(
        Effect.tap(() => Effect.sync(() => settled.push("succeeded"))),
        Effect.tapError(() => Effect.sync(() => settled.push("failed"))),
        // The worker settles a cut call's charge before the call's fiber ends: a short wait stands for that write.
        Effect.onInterrupt(() =>
          Effect.sleep("20 millis").pipe(Effect.zipRight(Effect.sync(() => settled.push("cut"))))
        )
      )
    }
  }
  return { ctx, given, settled }
}

describe("Handler.fromPromise", () => {
  it.live("a call is one ctx.call: its value comes back as a Success, its cost defaults to the estimate", () =>
    Effect.gen(function* () {
      const { ctx, given, settled } = context()
      const exits = yield* Handler.fromPromise(ctx, async (scope) => [
        await scope.call(async () => "a", { estimateCents: 7, resource: "openai:gpt-4.1:key-a" }),
        await scope.call(async () => "bb", { estimateCents: 7, cost: (result) => result.length })
      ])
      expect(exits.map((exit) => Exit.isSuccess(exit) && exit.value)).toEqual(["a", "bb"])
      expect(given.map((options) => [options.estimateCents, options.cost("xyz"), options.resource])).toEqual([
        [7, 7, "openai:gpt-4.1:key-a"],
        [7, 3, undefined]
      ])
      expect(settled).toEqual(["succeeded", "succeeded"])
    })
  )

  it.live("a rejected call resolves to its failure (the scope never rejects); a rejected f fails the effect", () =>
    Effect.gen(function* () {
      const { ctx } = context()
      const boom = new Error("boom")
      const exit = yield* Handler.fromPromise(ctx, (scope) =>
        scope.call(() => Promise.reject(boom), { estimateCents: 1 })
      )
      expect(exit).toStrictEqual(Exit.fail(boom))
      const failed = yield* Effect.flip(Handler.fromPromise(ctx, () => Promise.reject(boom)))
      expect(failed).toBe(boom)
    })
  )

  it.live("interrupted, it aborts the signals and ends only after the call in flight has settled", () =>
    Effect.gen(function* () {
      const { ctx, settled } = context()
      const started = yield* Deferred.make<AbortSignal>()
      let outer: AbortSignal | undefined
      const fiber = yield* Effect.fork(
        Handler.fromPromise(ctx, (scope) => {
          outer = scope.signal
          return scope.call(
            (signal) =>
              new Promise<string>((_, reject) => {
                Effect.runSync(Deferred.succeed(started, signal))
                signal.addEventListener("abort", () => reject(new Error("aborted")))
              }),
            { estimateCents: 5 }
          )
        })
      )
      const callSignal = yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(outer?.aborted).toBe(true)
      expect(callSignal.aborted).toBe(true)
      // Without the wait for the calls in flight, the handler would end before the cut call's settlement.
      expect(settled).toEqual(["cut"])
    })
  )

  it.live("run runs an effect of the handler's context as a Promise", () =>
    Effect.gen(function* () {
      const { ctx } = context()
      const reported: Array<number> = []
      const withProgress = { ...ctx, progress: (value: number) => Effect.sync(() => reported.push(value)) }
      yield* Handler.fromPromise(withProgress, (scope) => scope.run(withProgress.progress(0.5)))
      expect(reported).toEqual([0.5])
    })
  )
})
