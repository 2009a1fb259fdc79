import { describe, expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Effect } from "effect"
import * as StoreModel from "../src/StoreModel.js"

const t0 = Date.UTC(2030, 0, 1)

const item = (extra: Partial<SubmitItem> = {}): SubmitItem => {
  const id = Effect.runSync(makeJobId)
  return { id, queue: "q", type: "t", version: 1, inputHash: `h-${id}`, input: null, maxAttempts: 1, ...extra }
}

/** Runs a job to `outcome` at `at`: claimed, then settled. */
const finish = (model: StoreModel.StoreModel, jobId: JobId, outcome: "Complete" | "Fail" | "Abandon", at: number) => {
  model.claim([{ jobId, owner: "w", leaseMs: 10_000 }], at)
  const token = model.row(jobId)!.job.leaseToken
  model.settle(
    [
      {
        jobId,
        token,
        outcome:
          outcome === "Complete"
            ? { _tag: "Complete", result: null }
            : outcome === "Fail"
              ? { _tag: "Fail", errorClass: "auth", error: "401" }
              : { _tag: "Abandon", reason: "cancelled" }
      }
    ],
    at
  )
}

describe("StoreModel.purge", () => {
  it("picks the oldest across the states asked for, insertion order on equal times, before the cutoff only", () => {
    // Arrange: a and b created together at t0 (abandoned, succeeded), c at t0 + 1 (failed), live at t0 (queued),
    // other of another queue at t0 (succeeded).
    const model = StoreModel.make()
    const [a, b, live, other] = [item(), item(), item(), item({ queue: "other" })]
    const c = item({ requestKey: "k" })
    model.submit([a, b, live, other], t0)
    model.submit([c], t0 + 1)
    finish(model, a.id, "Abandon", t0 + 2)
    finish(model, b.id, "Complete", t0 + 2)
    finish(model, c.id, "Fail", t0 + 2)
    finish(model, other.id, "Complete", t0 + 2)
    const jobs = model.rows.map((r) => r.job)
    const ids = (options: Omit<StoreModel.PurgeOptions, "queue">) =>
      StoreModel.purgeTargets(jobs, { queue: "q", ...options }).map((job) => job.id)

    // Act and assert: the rule alone.
    expect(ids({ createdBefore: t0 + 2 })).toEqual([a.id, b.id, c.id])
    expect(ids({ createdBefore: t0 + 2, limit: 1 })).toEqual([a.id])
    expect(ids({ createdBefore: t0 + 2, states: ["failed", "succeeded"], limit: 2 })).toEqual([b.id, c.id])
    expect(ids({ createdBefore: t0 + 1 })).toEqual([a.id, b.id])
    expect(ids({ createdBefore: t0 })).toEqual([])
    expect(ids({ createdBefore: t0 + 2, states: [] })).toEqual([])

    // Act: the model's verb forgets what it purged.
    const purged = model.purge({ queue: "q", createdBefore: t0 + 2, states: ["failed"] })
    const again = model.submit([item({ requestKey: "k" })], t0 + 3).results[0]

    // Assert
    expect(purged).toEqual([c.id])
    expect([model.get(c.id), model.attempts(c.id), model.charges(c.id)]).toEqual([undefined, [], []])
    expect(model.list({ queue: "q", limit: null, order: "oldest" }).map((job) => job.id)).toEqual([
      a.id,
      b.id,
      live.id,
      again?._tag === "Created" ? again.job.id : "none"
    ])
    expect(again?._tag).toBe("Created")
  })
})
