/**
 * The core Worker's scenarios (duplicate delivery, lease takeover, cancel, graceful shutdown, budget refusal) run
 * through the Promise facade on one backend. Each test opens its own queue (a unique name) on a Store, Query and
 * Transport it also holds itself, so it can do what another process would: publish a duplicate message, or claim a
 * job as a worker that then dies.
 */
import { randomUUID } from "node:crypto"
import type * as Job from "@slowcall/core/Job"
import type * as Query from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { messageOf, Transport } from "@slowcall/core/Transport"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, BudgetExceeded, type JobContext, open, type Queue } from "../src/index.js"

type Services = Store | Query.Query | Transport

/** A backend: its URL and the Postgres schema or Redis prefix the tests write under. */
export interface BackendSpec {
  readonly url: string
  readonly schema?: string | undefined
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resolves when the signal aborts. */
const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve()
    signal.addEventListener("abort", () => resolve(), { once: true })
  })

const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 20_000) => {
  const end = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not reached in time")
    await sleep(20)
  }
}

/** The short attempt every scenario uses: a 500 ms call, so a lease of 1.5 s and a heartbeat every 500 ms. */
const attempt = { timeoutMs: 500 }

export const scenarios = (name: string, spec: () => BackendSpec) => {
  describe(`Promise facade scenarios: ${name}`, () => {
    const opened: Array<{ queue: Queue; scope: Scope.CloseableScope }> = []

    /** A queue on the backend, with the services it runs on for the test to act as another process. */
    const setup = async () => {
      const { schema, url } = spec()
      const name = `promise-${randomUUID().slice(0, 8)}`
      const scope = Effect.runSync(Scope.make())
      const context = (await Effect.runPromise(
        Layer.buildWithScope(Backend.layer({ url, queue: name, schema }), scope)
      )) as Context.Context<Services>
      const queue = await open({ queue: name, layer: Layer.succeedContext(context) })
      opened.push({ queue, scope })
      const withServices = <A, E>(effect: Effect.Effect<A, E, Services>) =>
        Effect.runPromise(Effect.provide(effect, context))
      return { queue, name, withServices }
    }

    afterEach(async () => {
      for (const { queue, scope } of opened.splice(0)) {
        await queue.close()
        await Effect.runPromise(Scope.close(scope, Exit.void))
      }
    })

    it("a duplicate delivery makes no second model call", async () => {
      const { queue, name, withServices } = await setup()
      let calls = 0
      const { id, job } = await queue.submit("summarize", { text: "doc" })
      await withServices(
        Effect.flatMap(Transport, (transport) =>
          transport.publish({ queue: name, items: [{ message: messageOf(job) }, { message: messageOf(job) }] })
        )
      )
      const handlers = {
        summarize: {
          attempt,
          run: async (input: { text: string }, ctx: JobContext) =>
            ctx.call(
              async () => {
                calls += 1
                await sleep(200)
                return { summary: `${input.text}!` }
              },
              { estimateCents: 2 }
            )
        }
      }
      const first = queue.worker({ handlers, concurrency: 2 })
      const second = queue.worker({ handlers, concurrency: 2 })

      await Promise.all([first.start(), second.start()])
      const done = await queue.wait(id, { timeoutMs: 20_000 })
      await sleep(300)

      expect(done.state).toBe("succeeded")
      expect(done.result).toEqual({ summary: "doc!" })
      expect(calls).toBe(1)
      expect(done.attempts).toBe(1)
      expect(done.costCents).toBe(2)
    })

    it("a lease left by a dead worker is taken over once it lapses, and the dead claim can never commit", async () => {
      const { queue, withServices } = await setup()
      const { id } = await queue.submit("summarize", { text: "doc" })
      const dead = await withServices(
        Effect.flatMap(Store, (store) =>
          store.claim({ items: [{ jobId: id as Job.JobId, owner: "dead", leaseMs: 400 }] })
        )
      )
      expect(dead.results[0]?._tag).toBe("Claimed")
      const attempts: Array<number> = []
      const worker = queue.worker({
        handlers: {
          summarize: {
            attempt,
            run: async (input: { text: string }, ctx: JobContext) => {
              attempts.push(ctx.attempt)
              return { summary: input.text }
            }
          }
        },
        sweeper: { intervalMs: 100 }
      })

      await worker.start()
      const done = await queue.wait(id, { timeoutMs: 20_000 })
      const stale = await withServices(
        Effect.flatMap(Store, (store) =>
          store.settle({ items: [{ jobId: id as Job.JobId, token: 1, outcome: { _tag: "Complete", result: null } }] })
        )
      )

      expect(done.state).toBe("succeeded")
      expect(done.leaseToken).toBeGreaterThanOrEqual(2)
      expect(attempts).toHaveLength(1)
      expect(stale.results[0]?._tag).not.toBe("Settled")
      expect((await queue.get(id)).result).toEqual({ summary: "doc" })
    })

    it("cancelling a running job aborts ctx.signal and settles the cut call at what it consumed", async () => {
      const { queue } = await setup()
      let callSignal: AbortSignal | undefined
      let handlerSignal: AbortSignal | undefined
      const worker = queue.worker({
        handlers: {
          summarize: {
            attempt,
            run: async (_input: unknown, ctx: JobContext) => {
              handlerSignal = ctx.signal
              return ctx.call(
                async (signal) => {
                  callSignal = signal
                  await aborted(signal)
                  throw signal.reason
                },
                { estimateCents: 5, costOnInterrupt: () => 1 }
              )
            }
          }
        }
      })
      await worker.start()
      const { id } = await queue.submit("summarize", { text: "doc" })
      await until(() => callSignal !== undefined)

      await queue.cancel(id)
      const done = await queue.wait(id, { timeoutMs: 20_000 })

      expect(done.state).toBe("abandoned")
      expect(done.abandonReason).toBe("cancelled")
      expect(handlerSignal?.aborted).toBe(true)
      expect(callSignal?.aborted).toBe(true)
      expect(done.costCents).toBe(1)
      const charges = await queue.charges(id)
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[1, true]])
    })

    it("stop lets a running handler finish within the grace period", async () => {
      const { queue } = await setup()
      let started = false
      const worker = queue.worker({
        handlers: {
          summarize: {
            attempt: { timeoutMs: 2_000 },
            run: async (input: { text: string }) => {
              started = true
              await sleep(400)
              return { summary: input.text }
            }
          }
        },
        shutdownGraceMs: 5_000
      })
      await worker.start()
      const { id } = await queue.submit("summarize", { text: "doc" })
      await until(() => started)

      await worker.stop()

      const job = await queue.get(id)
      expect(job.state).toBe("succeeded")
      expect(job.result).toEqual({ summary: "doc" })
    })

    it("stop past the grace period aborts the handler, releases its lease, and another worker finishes", async () => {
      const { queue } = await setup()
      const signals: Array<AbortSignal> = []
      const slow = queue.worker({
        handlers: {
          summarize: {
            attempt,
            run: async (_input: unknown, ctx: JobContext) => {
              signals.push(ctx.signal)
              await aborted(ctx.signal)
              throw new Error("stopped")
            }
          }
        },
        shutdownGraceMs: 50
      })
      await slow.start()
      const { id } = await queue.submit("summarize", { text: "doc" })
      await until(() => signals.length === 1)

      await slow.stop()
      const released = await queue.get(id)
      const fast = queue.worker({
        handlers: { summarize: { attempt, run: async (input: { text: string }) => ({ summary: input.text }) } }
      })
      await fast.start()
      const done = await queue.wait(id, { timeoutMs: 20_000 })

      expect(signals[0]?.aborted).toBe(true)
      expect(released.state).toBe("queued")
      expect(done.state).toBe("succeeded")
      expect(done.result).toEqual({ summary: "doc" })
    })

    it("a call whose estimate does not fit the budget is refused: nothing called, abandoned(budget)", async () => {
      const { queue } = await setup()
      let calls = 0
      let refused: unknown
      const worker = queue.worker({
        handlers: {
          summarize: {
            attempt,
            run: async (_input: unknown, ctx: JobContext) => {
              try {
                return await ctx.call(
                  async () => {
                    calls += 1
                    return "never"
                  },
                  { estimateCents: 5 }
                )
              } catch (error) {
                refused = error
                throw error
              }
            }
          }
        }
      })
      await worker.start()

      const { id } = await queue.submit("summarize", { text: "doc" }, { budgetCents: 3 })
      const done = await queue.wait(id, { timeoutMs: 20_000 })

      expect(done.state).toBe("abandoned")
      expect(done.abandonReason).toBe("budget")
      expect(calls).toBe(0)
      expect(refused).toBeInstanceOf(BudgetExceeded)
      expect(done.costCents).toBe(0)
    })
  })
}
