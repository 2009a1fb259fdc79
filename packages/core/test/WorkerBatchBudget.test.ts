/**
 * A batch's budget against items that run at once, with the real Worker over the memory Store: every item is
 * claimed while the batch has room for one call, and each attempt makes two calls. The Store refuses the
 * reservation that would take the batch's spend (reservations of calls in flight included) past its budget, so the
 * batch never spends more than its budget, and the item whose call was refused ends abandoned(budget) with a
 * `lastError` that names the batch.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import type * as Batch from "../src/Batch.js"
import * as Handler from "../src/Handler.js"
import { makeJobId } from "../src/Ids.js"
import type { JobId } from "../src/Job.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"
import * as Worker from "../src/Worker.js"
import { submitItem, terminal } from "./fixtures.js"

/** Two calls per attempt, each estimated and billed at 3c, each 1 s long. */
const twoCalls = Handler.make({
  type: "t",
  version: 1,
  input: Schema.Unknown,
  result: Schema.Unknown,
  estimateCents: 3,
  attempt: { timeoutMs: 3_000 },
  run: (_input, ctx) => {
    const call = ctx.call({ estimateCents: 3, run: Effect.sleep(1_000), cost: () => 3 })
    return Effect.as(Effect.zipRight(call, call), null)
  }
})

describe("a batch's budget with its items running at once", () => {
  it.scoped("is never passed: the reservation past it is refused and its item ends abandoned(budget)", () =>
    Effect.gen(function* () {
      const { batches, query, store } = yield* StoreModule.makeMemory
      const transport = yield* TransportModule.makeMemory()
      const batchId = (yield* makeJobId) as string as Batch.BatchId
      yield* batches.open({ spec: { id: batchId, fingerprint: "b1:two", size: 2, budgetCents: 7 } })
      const items = [yield* submitItem({ input: { n: 0 } }), yield* submitItem({ input: { n: 1 } })]
      const added = yield* batches.add({ batchId, offset: 0, items })
      if (added.result._tag !== "Added") return yield* Effect.dieMessage(`batch add: ${added.result._tag}`)
      yield* transport.publish({
        queue: "q",
        items: items.map((item) => ({ message: { jobId: item.id, type: "t", version: 1, priority: 0 } }))
      })

      yield* Worker.make({ queue: "q", id: "w", concurrency: 2, handlers: [twoCalls] }).pipe(
        Effect.provideService(Store, store),
        Effect.provideService(Transport, transport)
      )
      const ended = (jobId: JobId) => Effect.map(Effect.orDie(query.get({ jobId })), (job) => job.state)
      for (let waited = 0; waited < 60_000; waited += 100) {
        const states = yield* Effect.forEach(items, (item) => ended(item.id))
        if (states.every((state) => terminal.includes(state))) break
        yield* TestClock.adjust(100)
      }

      const jobs = yield* Effect.forEach(items, (item) => Effect.orDie(query.get({ jobId: item.id })))
      const batch = (yield* batches.get({ batchId }))!
      // 3 + 3 reserved by the first calls; a second call of either would take the batch to 9 > 7.
      expect(batch.costCents).toBe(6)
      expect(jobs.map((job) => [job.state, job.abandonReason, job.costCents])).toEqual([
        ["abandoned", "budget", 3],
        ["abandoned", "budget", 3]
      ])
      for (const job of jobs) expect(job.lastError).toContain(`batch ${batchId}`)
      const ledger = yield* Effect.forEach(jobs, (job) => query.charges({ jobId: job.id }))
      expect(ledger.map((rows) => rows.map((row) => [row.amountCents, row.settled]))).toEqual([
        [[3, true]],
        [[3, true]]
      ])
    })
  )
})
