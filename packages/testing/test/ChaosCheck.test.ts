/**
 * The chaos harness's checker on hand-made runs: a clean one is green, and each defect the harness exists to catch
 * (a lost job, a stuck one, a double generation no fault excuses, a bill above the Store's spend, two jobs for one
 * key, a result written by a holder whose lease had been taken over, a message acked before its outcome was stored)
 * turns it red on its own count.
 */
import { describe, expect, it } from "@effect/vitest"
import { check, type FaultRecord, failures, type LedgerEntry, type Observations } from "../chaos/Check.js"

const clean = (): Observations => ({
  backend: "pg",
  seed: 1,
  submissions: [
    { key: "k1", acknowledgedIds: ["j1"] },
    { key: "k2", acknowledgedIds: ["j2"] },
    { key: "k3", acknowledgedIds: [] }
  ],
  jobsByKey: new Map([
    ["k1", [{ id: "j1", state: "succeeded", costCents: 2 }]],
    ["k2", [{ id: "j2", state: "succeeded", costCents: 3 }]],
    ["k3", []]
  ]),
  missingIds: new Set(),
  ledger: [
    { jobId: "j1", token: 1, pid: 100, costCents: 2, startedAt: 1_000 },
    { jobId: "j2", token: 1, pid: 200, costCents: 3, startedAt: 1_500 }
  ],
  faults: []
})

/** j1 called twice: by process 100 at 1 s, then by 200 at 9 s. */
const doubled: ReadonlyArray<LedgerEntry> = [
  { jobId: "j1", token: 1, pid: 100, costCents: 2, startedAt: 1_000 },
  { jobId: "j1", token: 2, pid: 200, costCents: 2, startedAt: 9_000 },
  { jobId: "j2", token: 1, pid: 200, costCents: 3, startedAt: 1_500 }
]

describe("chaos checker", () => {
  it("a clean run is green, and counts what it saw", () => {
    const report = check(clean())
    expect(failures(report)).toEqual([])
    expect(report).toMatchObject({
      submitted: 3,
      acknowledged: 2,
      terminal: 2,
      modelCalls: 2,
      storeSpendCents: 5,
      providerLedgerCents: 5,
      doubleGenerations: { excused: 0, unexcused: 0 }
    })
  })

  it("an acknowledged job the Store lost is red", () => {
    const run = clean()
    const report = check({ ...run, jobsByKey: new Map([...run.jobsByKey, ["k2", []]]), missingIds: new Set(["j2"]) })
    expect(report.lost).toBe(1)
    expect(failures(report)).toContain("1 acknowledged job(s) lost")
  })

  it("a job left running is stuck", () => {
    const run = clean()
    const report = check({
      ...run,
      jobsByKey: new Map([...run.jobsByKey, ["k2", [{ id: "j2", state: "running", costCents: 3 }]]])
    })
    expect(report.stuck).toBe(1)
    expect(failures(report)).toHaveLength(1)
  })

  it("a double generation with no fault on its first holder is unexcused, and the spend under the bill is red", () => {
    const report = check({ ...clean(), ledger: doubled })
    expect(report.doubleGenerations).toEqual({ excused: 0, unexcused: 1 })
    // The Store kept 2 cents for j1; the model billed 4.
    expect(report.underCounted).toBe(1)
    expect(failures(report)).toHaveLength(2)
  })

  it("the first holder's own report that it cut that attempt short excuses it; a report of another attempt does not", () => {
    const run = {
      ...clean(),
      ledger: doubled,
      jobsByKey: new Map([...clean().jobsByKey, ["k1", [{ id: "j1", state: "succeeded", costCents: 4 }]]])
    }
    expect(check({ ...run, cutShort: new Set(["j1:1"]) }).doubleGenerations).toEqual({ excused: 1, unexcused: 0 })
    for (const other of ["j1:2", "j2:1"]) {
      const report = check({ ...run, cutShort: new Set([other]) })
      expect(report.doubleGenerations, other).toEqual({ excused: 0, unexcused: 1 })
      expect(failures(report), other).toHaveLength(1)
    }
  })

  it("a kill or a pause of the first holder between the two calls excuses it; a fault elsewhere does not", () => {
    const run = {
      ...clean(),
      ledger: doubled,
      jobsByKey: new Map([...clean().jobsByKey, ["k1", [{ id: "j1", state: "succeeded", costCents: 4 }]]])
    }
    const excusing: ReadonlyArray<FaultRecord> = [
      { kind: "kill", pid: 100, at: 2_000 },
      { kind: "pause", pid: 100, at: 1_200, until: 8_000 },
      { kind: "blackhole", pid: 100, at: 500, until: 1_100 },
      { kind: "db-outage", at: 3_000, until: 20_000 },
      // Its outcome write held in the network until 200 had called again.
      { kind: "stall", pid: 100, at: 2_500, until: 9_100 }
    ]
    for (const fault of excusing) {
      const report = check({ ...run, faults: [fault] })
      expect(report.doubleGenerations, fault.kind).toEqual({ excused: 1, unexcused: 0 })
      expect(failures(report), fault.kind).toEqual([])
    }
    const notExcusing: ReadonlyArray<FaultRecord> = [
      { kind: "kill", pid: 200, at: 2_000 },
      // Graceful: the worker hands its leases back after its handlers finish, it never lets one expire.
      { kind: "term", pid: 100, at: 2_000 },
      { kind: "kill", pid: 100, at: 9_500 },
      { kind: "sqs-restart", at: 2_000 },
      { kind: "stall", pid: 200, at: 2_500, until: 9_100 }
    ]
    for (const fault of notExcusing) {
      expect(check({ ...run, faults: [fault] }).doubleGenerations, fault.kind).toEqual({ excused: 0, unexcused: 1 })
    }
  })

  it("two jobs for one key, or two ids acknowledged for it, are duplicates", () => {
    const run = clean()
    const twoStored = check({
      ...run,
      jobsByKey: new Map([
        ...run.jobsByKey,
        [
          "k1",
          [
            { id: "j1", state: "succeeded", costCents: 2 },
            { id: "j9", state: "succeeded", costCents: 0 }
          ]
        ]
      ])
    })
    expect(twoStored.duplicateJobsPerKey).toBe(1)
    const twoAcknowledged = check({
      ...run,
      submissions: [{ key: "k1", acknowledgedIds: ["j1", "j9"] }, ...run.submissions.slice(1)]
    })
    expect(twoAcknowledged.duplicateJobsPerKey).toBe(1)
    // j9 was acknowledged and the Store has no such job: lost as well.
    expect(twoAcknowledged.lost).toBe(1)
  })

  it("a result written under a lease older than the last billed one is a stale settlement", () => {
    const run = clean()
    const settledBy = (resultToken: number, fault: FaultRecord) =>
      check({
        ...run,
        ledger: doubled,
        faults: [fault],
        jobsByKey: new Map([...run.jobsByKey, ["k1", [{ id: "j1", state: "succeeded", costCents: 4, resultToken }]]])
      })
    // The first holder (token 1) settled after process 200 took the job over with token 2: paused past its lease,
    // or its outcome write held in the network until then. The fault excuses the second call, never the write.
    const lateWrites: ReadonlyArray<FaultRecord> = [
      { kind: "pause", pid: 100, at: 1_200, until: 8_000 },
      { kind: "stall", pid: 100, at: 2_500, until: 9_100 }
    ]
    for (const fault of lateWrites) {
      expect(settledBy(1, fault).staleSettlements, fault.kind).toBe(1)
      expect(failures(settledBy(1, fault)), fault.kind).toEqual([
        "1 job(s) settled by a holder whose lease had been taken over"
      ])
      expect(settledBy(2, fault).staleSettlements, fault.kind).toBe(0)
      expect(failures(settledBy(2, fault)), fault.kind).toEqual([])
    }
    // A job that failed keeps no result to compare: not a stale settlement.
    const failed = check({
      ...run,
      ledger: doubled,
      faults: [lateWrites[1]!],
      jobsByKey: new Map([...run.jobsByKey, ["k1", [{ id: "j1", state: "failed", costCents: 4, resultToken: 1 }]]])
    })
    expect(failed.staleSettlements).toBe(0)
  })

  it("a message acked before its job's outcome was stored is red; one acked after it, or a duplicate's, is not", () => {
    const run = clean()
    const withAcks = (acks: ReadonlyArray<{ jobId: string; at: number }>) =>
      check({
        ...run,
        acks,
        jobsByKey: new Map([
          ...run.jobsByKey,
          ["k1", [{ id: "j1", state: "succeeded", costCents: 2, resultToken: 1, terminalAt: 9_000 }]]
        ])
      })
    // The worker's ack reached the transport at 2 s; the outcome was stored at 9 s (its write held meanwhile).
    const early = withAcks([{ jobId: "j1", at: 2_000 }])
    expect(early.ackedBeforeStored).toBe(1)
    expect(failures(early)).toEqual(["1 job(s) whose message was acked before their outcome was stored"])
    // After the write, within the clock slack, or a second message of the settled job acked later: green.
    for (const at of [9_050, 8_500]) expect(withAcks([{ jobId: "j1", at }]).ackedBeforeStored, String(at)).toBe(0)
    expect(
      withAcks([
        { jobId: "j1", at: 9_100 },
        { jobId: "j1", at: 20_000 }
      ]).ackedBeforeStored
    ).toBe(0)
    // Two early acks of one job count the job once.
    expect(
      withAcks([
        { jobId: "j1", at: 1_000 },
        { jobId: "j1", at: 2_000 }
      ]).ackedBeforeStored
    ).toBe(1)
  })

  it("recovery is the time from a kill to the next call of each job the killed process held", () => {
    const report = check({
      ...clean(),
      ledger: [...doubled, { jobId: "j3", token: 1, pid: 100, costCents: 1, startedAt: 100 }],
      faults: [{ kind: "kill", pid: 100, at: 2_000 }],
      jobsByKey: new Map([...clean().jobsByKey, ["k1", [{ id: "j1", state: "succeeded", costCents: 4 }]]])
    })
    // j1: killed at 2 s, called again at 9 s. j3 has no later call (it had settled), so it is no sample.
    expect(report.recovery).toEqual({ p50Ms: 7_000, maxMs: 7_000, samples: 1 })
    expect(report.faults).toEqual({ kill: 1 })
  })
})
