import * as Core from "@slowcall/core/Errors"
import { BudgetExceeded as CoreBudgetExceeded, DeadlineExceeded as CoreDeadlineExceeded } from "@slowcall/core/Handler"
import type { JobId } from "@slowcall/core/Job"
import { InvalidWorkerOptions } from "@slowcall/core/Worker"
import { describe, expect, it } from "vitest"
import {
  AlreadyTerminal,
  BudgetExceeded,
  ConfigError,
  DeadlineExceeded,
  fromCore,
  Interrupted,
  InvalidInput,
  KeyReused,
  LeaseLost,
  NotFound,
  QueueFull,
  SlowcallError,
  StoreUnavailable,
  Timeout,
  TransportUnavailable
} from "../src/index.js"

const jobId = "01890000-0000-7000-8000-000000000000" as JobId

describe("Errors", () => {
  it("maps every core typed failure to its class, keeps it as .cause, and each is a SlowcallError and an Error", () => {
    const cases: ReadonlyArray<readonly [unknown, new (...args: Array<any>) => SlowcallError, string]> = [
      [new Core.InvalidInput({ path: "items.0.text", message: "not a string" }), InvalidInput, "invalid_input"],
      [new Core.IdempotencyKeyReused({ requestKey: "k", existingJobId: jobId }), KeyReused, "key_reused"],
      [new Core.JobNotFound({ jobId }), NotFound, "not_found"],
      [new Core.AlreadyTerminal({ jobId, state: "succeeded" }), AlreadyTerminal, "already_terminal"],
      [new Core.QueueFull({ queue: "q", tenant: null, limit: 1, retryAfterMs: 5_000 }), QueueFull, "queue_full"],
      [
        new CoreBudgetExceeded({ jobId, costCents: 1, estimateCents: 5, budgetCents: 3 }),
        BudgetExceeded,
        "budget_exceeded"
      ],
      [new CoreDeadlineExceeded({ jobId, deadlineAt: 1, now: 2 }), DeadlineExceeded, "deadline_exceeded"],
      [new Core.LeaseLost({ jobId, token: 1, currentToken: 2, state: "running" }), LeaseLost, "lease_lost"],
      [
        new Core.StoreError({ reason: "Timeout", operation: "submit", detail: "slow" }),
        StoreUnavailable,
        "store_unavailable"
      ],
      [
        new Core.TransportError({ reason: "Connection", operation: "publish", detail: "down" }),
        TransportUnavailable,
        "transport_unavailable"
      ],
      [new InvalidWorkerOptions({ option: "keepAliveMs", reason: "too short" }), ConfigError, "config"]
    ]
    for (const [core, expected, code] of cases) {
      const mapped = fromCore(core)

      expect(mapped).toBeInstanceOf(expected)
      expect(mapped).toBeInstanceOf(SlowcallError)
      expect(mapped).toBeInstanceOf(Error)
      expect((mapped as SlowcallError).code).toBe(code)
      expect((mapped as SlowcallError).cause).toBe(core)
      expect((mapped as SlowcallError).name).toBe(expected.name)
    }
  })

  it("keeps the detail of each core error in its fields", () => {
    const invalid = fromCore(new Core.InvalidInput({ path: "items.0.text", message: "not a string" })) as InvalidInput
    const reused = fromCore(new Core.IdempotencyKeyReused({ requestKey: "k", existingJobId: jobId })) as KeyReused
    const full = fromCore(new Core.QueueFull({ queue: "q", tenant: null, limit: 1, retryAfterMs: 5_000 })) as QueueFull
    const ambiguous = fromCore(
      new Core.StoreError({ reason: "Ambiguous", operation: "settle", detail: "lost reply" })
    ) as StoreUnavailable
    const constraint = fromCore(
      new Core.StoreError({ reason: "Constraint", operation: "submit", detail: "refused" })
    ) as StoreUnavailable

    expect(invalid.issues).toEqual([{ message: "not a string", path: ["items", 0, "text"] }])
    expect(reused.key).toBe("k")
    expect(reused.existingJobId).toBe(jobId)
    expect(full.retryAfterMs).toBe(5_000)
    expect([ambiguous.retryable, ambiguous.ambiguous]).toEqual([true, true])
    expect([constraint.retryable, constraint.ambiguous]).toEqual([false, false])
  })

  it("passes a handler's own error and a facade error through untouched", () => {
    const own = new TypeError("mine")
    const facade = new Timeout("j", 10)

    expect(fromCore(own)).toBe(own)
    expect(fromCore(facade)).toBe(facade)
    expect(fromCore("text")).toBe("text")
  })

  it("the facade's own errors carry their codes", () => {
    expect(new Timeout("j", 10).code).toBe("timeout")
    expect(new Interrupted().code).toBe("interrupted")
    expect(new ConfigError("x").code).toBe("config")
    expect(new InvalidInput([{ message: "m", path: ["a", 1] }]).message).toBe("invalid input: a.1: m")
  })
})
