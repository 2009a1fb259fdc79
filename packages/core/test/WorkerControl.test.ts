/**
 * The attempt's control block: which stop reason wins. The first reason counts, but a lost lease replaces a reason
 * that kept the lease, because once the lease is gone nothing may be written under its token.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Control from "../src/internal/workerControl.js"

const stops = (...reasons: ReadonlyArray<Control.StopReason>) =>
  Effect.gen(function* () {
    const control = Control.make({ localLeaseEnd: 0, costCents: 0 })
    const set: Array<boolean> = []
    for (const reason of reasons) set.push(yield* Control.stop(control, reason))
    return { reason: control.stopReason, set }
  })

describe("workerControl.stop", () => {
  it.effect("keeps the first reason among those that keep the lease", () =>
    Effect.gen(function* () {
      expect(yield* stops("cancelled", "deadline", "shutdown")).toEqual({
        reason: "cancelled",
        set: [true, false, false]
      })
    })
  )

  it.effect("lets a lost lease replace a reason that kept it, and nothing replace a lost lease", () =>
    Effect.gen(function* () {
      expect(yield* stops("cancelled", "lease_lost", "deadline")).toEqual({
        reason: "lease_lost",
        set: [true, true, false]
      })
      expect(yield* stops("shutdown", "self_fenced", "lease_lost")).toEqual({
        reason: "self_fenced",
        set: [true, true, false]
      })
      expect(Control.leaseGone((yield* stops("deadline", "lease_lost")).reason)).toBe(true)
    })
  )
})
