/**
 * The generators of the concurrent property, and its fixed scenarios. A batch aims at one job (its focus: a running
 * job, a queued one, a failed one, or one by index) and one request key, with a theme that says which verbs race:
 * many claims of one job; settles, heartbeats and cancels under the same and different tokens; charges under
 * distinct call ids or one call id; submits with one request key; replays of one job; `claimNext` racing claims;
 * sweeps racing settles and heartbeats; or everything at once. Where the backend has `Store.cycle`, cycles (each a
 * worker's settle, heartbeat, charge and next claim in one atomic write) race claims, settles, charges and other
 * cycles of the jobs they release, and join the everything-at-once theme. Before each batch come up to two commands one at a
 * time and a step of store time, so that batches meet jobs in every state, leases at their end, and deadlines.
 *
 * @internal
 */

import fc from "fast-check"
import { leaseMs, outcome, submitSpec, token } from "../storeProperty/arbitraries.js"
import type { SubmitSpec } from "../storeProperty/commands.js"
import type { JobRef } from "../storeProperty/world.js"
import type { Command, Part, Round, TimeStep } from "./commands.js"

type Kind = Command["kind"]

/** The jobs of a batch: mostly its focus, now and then another. */
const near = (focus: JobRef): fc.Arbitrary<JobRef> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constant(focus) },
    { weight: 1, arbitrary: fc.constantFrom<JobRef>("running", "running2", "queued") },
    { weight: 1, arbitrary: fc.nat({ max: 5 }) }
  )

/** Submits that race for one request key: mostly the same key, input and tenant, sometimes another input. */
const racingSubmit: fc.Arbitrary<SubmitSpec> = fc.record({
  tenant: fc.constantFrom(0, 0, 0, 1),
  key: fc.constantFrom<string | null>("key-0", "key-0", "key-0", "key-1", null),
  input: fc.constantFrom(0, 0, 0, 1),
  type: fc.constant(0),
  delayMs: fc.constantFrom(0, 0, 500),
  deadlineMs: fc.constantFrom<number | null>(null, null, 4_000),
  budgetCents: fc.constantFrom<number | null>(null, 6),
  maxAttempts: fc.constantFrom(1, 2, 3),
  priority: fc.constantFrom(0, 1),
  fingerprinted: fc.constantFrom(true, true, true, false)
})

const tenantRef = fc.constantFrom("own" as const, "own" as const, "none" as const, "other" as const)

/** A command of kind `K` (as `commandOf(K, ...)` draws it) without its kind, as a cycle carries it. */
const partOf = <K extends Kind>(command: Command): Part<K> => {
  const { kind: _, ...part } = command
  return part as unknown as Part<K>
}

/** A part of a cycle: often empty, else one or two items of the kind (which may name the same job). */
const cyclePart = <K extends "Settle" | "Heartbeat" | "Charge">(
  kind: K,
  job: fc.Arbitrary<JobRef>,
  calls: number
): fc.Arbitrary<ReadonlyArray<Part<K>>> =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant([]) },
    { weight: 2, arbitrary: fc.array(commandOf(kind, job, calls).map(partOf<K>), { minLength: 1, maxLength: 2 }) }
  )

/** One command of the given kind; `calls` bounds the call ids of charges (1: one call id for all). */
const commandOf = (kind: Kind, job: fc.Arbitrary<JobRef>, calls: number): fc.Arbitrary<Command> => {
  switch (kind) {
    case "Submit":
      return racingSubmit.map((spec) => ({ kind, specs: [spec] }))
    case "Claim":
      return fc.record({
        kind: fc.constant(kind),
        job,
        owner: fc.nat({ max: 7 }),
        leaseMs,
        estimateCents: fc.constantFrom<number | null>(null, null, 0, 2, 5)
      })
    case "ClaimNext":
      return fc.record({
        kind: fc.constant(kind),
        owner: fc.nat({ max: 7 }),
        max: fc.integer({ min: 1, max: 3 }),
        leaseMs,
        fair: fc.boolean()
      })
    case "Heartbeat":
      return fc.record({
        kind: fc.constant(kind),
        job,
        token,
        leaseMs,
        progress: fc.constantFrom<number | null>(null, 0.5)
      })
    case "Settle":
      return fc.record({ kind: fc.constant(kind), job, token, outcome })
    case "Charge":
      return fc.record({
        kind: fc.constant(kind),
        job,
        call: fc.nat({ max: calls - 1 }),
        token,
        amountCents: fc.constantFrom(0.5, 1, 2.5, 4),
        settled: fc.boolean()
      })
    case "Cancel":
      return fc.record({ kind: fc.constant(kind), job, tenant: tenantRef })
    case "Replay":
      return fc.record({ kind: fc.constant(kind), job })
    case "Sweep":
      return fc.record({
        kind: fc.constant(kind),
        republishAfterMs: fc.constantFrom<number | null>(null, 0, 1_000),
        limit: fc.constantFrom<number | null>(null, null, 1, 2)
      })
    case "Get":
      return fc.record({ kind: fc.constant(kind), job, tenant: tenantRef })
    case "Cycle":
      return fc.record({
        kind: fc.constant(kind),
        settle: cyclePart("Settle", job, calls),
        heartbeat: cyclePart("Heartbeat", job, calls),
        charge: cyclePart("Charge", job, calls),
        claimNext: fc.option(commandOf("ClaimNext", job, calls).map(partOf<"ClaimNext">), { nil: null, freq: 4 })
      })
    case "BatchOpen":
    case "BatchAdd":
    case "BatchCancel":
      throw new Error(`${kind} is sent by the batch scenarios only`)
  }
}

interface Theme {
  readonly focus: ReadonlyArray<JobRef>
  readonly kinds: Partial<Record<Kind, number>>
}

/** Which verbs race in a batch, with weights. */
const themes: ReadonlyArray<Theme> = [
  { focus: ["queued", "running", 0], kinds: { Claim: 6, ClaimNext: 3, Cancel: 1, Get: 1 } },
  { focus: ["running", "running2"], kinds: { Settle: 4, Heartbeat: 3, Claim: 2, Cancel: 1, Charge: 1, Get: 1 } },
  { focus: ["running", "running", 0, "failed"], kinds: { Charge: 8, Settle: 1, Heartbeat: 1, Get: 1 } },
  { focus: ["queued"], kinds: { Submit: 8, Claim: 1, Cancel: 1, ClaimNext: 1 } },
  { focus: ["failed"], kinds: { Replay: 5, Claim: 2, Cancel: 1, ClaimNext: 1, Charge: 1 } },
  { focus: ["running", "queued"], kinds: { Sweep: 3, Settle: 3, Heartbeat: 2, Claim: 2, ClaimNext: 1, Cancel: 1 } },
  {
    focus: ["running", "queued", "failed", 0, 1],
    kinds: {
      Submit: 1,
      Claim: 1,
      ClaimNext: 1,
      Heartbeat: 1,
      Settle: 1,
      Charge: 1,
      Cancel: 1,
      Replay: 1,
      Sweep: 1,
      Get: 1
    }
  }
]

/**
 * The themes with `Store.cycle`: cycles of the running jobs racing claims of them, their settles, heartbeats and
 * charges, `claimNext` and sweeps; and a cycle now and then in the everything-at-once theme.
 */
const cycleThemes: ReadonlyArray<Theme> = [
  ...themes.slice(0, -1),
  {
    focus: ["running", "running2", 0],
    kinds: { Cycle: 5, Claim: 2, ClaimNext: 1, Settle: 1, Heartbeat: 1, Charge: 1, Sweep: 1, Get: 1 }
  },
  { ...themes[themes.length - 1]!, kinds: { ...themes[themes.length - 1]!.kinds, Cycle: 1 } }
]

/** A batch of 2 to 8 commands at one job, in one theme (of `cycleThemes` when the backend has `cycle`). */
const batch = (cycle: boolean): fc.Arbitrary<ReadonlyArray<Command>> => {
  const chosen = cycle ? cycleThemes : themes
  return fc
    .record({
      theme: fc.nat({ max: chosen.length - 1 }),
      pick: fc.nat(),
      calls: fc.constantFrom(1, 2, 16)
    })
    .chain(({ theme, pick, calls }) => {
      const { focus, kinds } = chosen[theme]!
      const job = near(focus[pick % focus.length]!)
      const command = fc.oneof(
        ...Object.entries(kinds).map(([kind, weight]) => ({ weight, arbitrary: commandOf(kind as Kind, job, calls) }))
      )
      return fc.array(command, { minLength: 2, maxLength: 8 })
    })
}

/** A command one at a time before a batch: mostly claims, settles and submits that move jobs between states. */
const single: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: commandOf("Claim", fc.constantFrom<JobRef>("queued", "queued", 0, 1, 2), 1) },
  { weight: 3, arbitrary: commandOf("Settle", fc.constantFrom<JobRef>("running", "running2"), 1) },
  { weight: 2, arbitrary: submitSpec.map((spec): Command => ({ kind: "Submit", specs: [spec] })) },
  { weight: 1, arbitrary: commandOf("Charge", fc.constantFrom<JobRef>("running", 0), 3) },
  { weight: 1, arbitrary: commandOf("Sweep", fc.constant<JobRef>(0), 1) }
)

const time: fc.Arbitrary<TimeStep | null> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(null) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("Tick" as const), ms: fc.constantFrom(1, 500, 1_000, 3_000) })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("TickTo" as const),
      job: fc.constantFrom<JobRef>("running", "queued", 0),
      field: fc.constantFrom("leaseUntil" as const, "runAfter" as const, "deadlineAt" as const),
      offset: fc.constantFrom(-1, 0, 1)
    })
  }
)

/** One round: up to two commands one at a time, a step of store time, a batch. */
const round = (cycle: boolean): fc.Arbitrary<Round> =>
  fc.record({ before: fc.array(single, { maxLength: 2 }), time, batch: batch(cycle) })

/** What every sequence starts with: one to four submits, so that the first batch meets jobs. */
export const prelude: fc.Arbitrary<ReadonlyArray<SubmitSpec>> = fc.array(submitSpec, { minLength: 1, maxLength: 4 })

/**
 * A sequence of `min` to `max` rounds: every round ends with one concurrent batch; with `cycle` (the backend has
 * `Store.cycle`), batches send cycles too. Without it the sequences are the ones drawn before cycles existed.
 */
export const rounds = (min: number, max: number, cycle: boolean): fc.Arbitrary<ReadonlyArray<Round>> =>
  fc.array(round(cycle), { minLength: min, maxLength: max })

const job = (overrides: Partial<SubmitSpec> = {}): SubmitSpec => ({
  tenant: 0,
  key: null,
  input: 0,
  type: 0,
  delayMs: 0,
  deadlineMs: null,
  budgetCents: null,
  maxAttempts: 3,
  priority: 0,
  fingerprinted: true,
  ...overrides
})

const claim = (job: JobRef, owner = 0, leaseMs = 3_000): Command => ({
  kind: "Claim",
  job,
  owner,
  leaseMs,
  estimateCents: null
})

const times = <A>(n: number, f: (i: number) => A): ReadonlyArray<A> => Array.from({ length: n }, (_, i) => f(i))

/**
 * The batch scenarios: a batch of two items with both callbacks (jobs 1 and 2 after the opening job 0), both items
 * claimed, then their settlements sent at once, so each finisher may see itself as the last; and the same with a
 * cancel of the batch racing the two settlements. Exactly one `onComplete` job, and one `onSuccess` job when both
 * succeeded, is the only outcome any order explains. They need a backend with batch verbs.
 *
 * @internal
 */
export const batchScenarios: Readonly<Record<string, readonly [ReadonlyArray<SubmitSpec>, ReadonlyArray<Round>]>> = {
  "two workers settle the last two items of a batch at once: exactly one callback": [
    [job()],
    [
      {
        before: [{ kind: "BatchOpen", size: 2 }, { kind: "BatchAdd", batch: 0, count: 2 }, claim(1, 1), claim(2, 2)],
        time: null,
        batch: [
          { kind: "Settle", job: 1, token: "current", outcome: { _tag: "Complete", result: null } },
          { kind: "Settle", job: 2, token: "current", outcome: { _tag: "Complete", result: null } }
        ]
      },
      {
        before: [{ kind: "BatchOpen", size: 3 }, { kind: "BatchAdd", batch: 1, count: 3 }, claim(5, 1), claim(6, 2)],
        time: null,
        batch: [
          { kind: "Settle", job: 5, token: "current", outcome: { _tag: "Fail", errorClass: "auth" } },
          { kind: "Settle", job: 6, token: "current", outcome: { _tag: "Complete", result: null } },
          claim(7, 3),
          { kind: "ClaimNext", owner: 4, max: 2, leaseMs: 3_000 }
        ]
      }
    ]
  ],
  "a batch cancel racing the settlements of its last items": [
    [job()],
    [
      {
        before: [{ kind: "BatchOpen", size: 3 }, { kind: "BatchAdd", batch: 0, count: 3 }, claim(1, 1), claim(2, 2)],
        time: null,
        batch: [
          { kind: "Settle", job: 1, token: "current", outcome: { _tag: "Complete", result: null } },
          { kind: "Settle", job: 2, token: "current", outcome: { _tag: "Fail", errorClass: "auth" } },
          { kind: "BatchCancel", batch: 0 },
          claim(3, 3)
        ]
      }
    ]
  ]
}

/**
 * The cycle scenarios, for a backend with `Store.cycle`: two workers' cycles at once, each settling its own running
 * job (a retry at once, a release) with a heartbeat or a charge of it and claiming next, racing claims of both jobs
 * and another worker's `claimNext`. Whichever cycle comes first, its claim takes back the job its settle released
 * (the other job is still running), so in every order each job ends with the worker that held it and every other
 * claim is refused; a store that lets a command in between a cycle's settle and its claim hands a released job to
 * someone else.
 *
 * @internal
 */
export const cycleScenarios: Readonly<Record<string, readonly [ReadonlyArray<SubmitSpec>, ReadonlyArray<Round>]>> = {
  "two cycles settle their jobs and claim next, racing claims of the released jobs": [
    [job(), job()],
    [
      {
        before: [claim(0, 0), claim(1, 1)],
        time: null,
        batch: [
          {
            kind: "Cycle",
            settle: [{ job: 0, token: "current", outcome: { _tag: "Retry", delayMs: 0, errorClass: "timeout" } }],
            heartbeat: [],
            charge: [{ job: 0, call: 0, token: "current", amountCents: 1, settled: true }],
            claimNext: { owner: 0, max: 2, leaseMs: 3_000 }
          },
          {
            kind: "Cycle",
            settle: [{ job: 1, token: "current", outcome: { _tag: "Release" } }],
            heartbeat: [{ job: 1, token: "current", leaseMs: 3_000, progress: null }],
            charge: [],
            claimNext: { owner: 1, max: 2, leaseMs: 3_000 }
          },
          claim(0, 2),
          claim(1, 3),
          { kind: "ClaimNext", owner: 4, max: 2, leaseMs: 3_000 }
        ]
      }
    ]
  ]
}

/**
 * Fixed scenarios, run before the random sequences: the races a store most often gets wrong, each as the data a
 * random sequence would be.
 *
 * @internal
 */
export const scenarios: Readonly<Record<string, readonly [ReadonlyArray<SubmitSpec>, ReadonlyArray<Round>]>> = {
  "16 charges on one job, distinct call ids": [
    [job()],
    [
      {
        before: [claim("queued")],
        time: null,
        batch: times(16, (i) => ({
          kind: "Charge",
          job: "running",
          call: i,
          token: "current",
          amountCents: 1,
          settled: true
        }))
      }
    ]
  ],
  "8 charges on one job, one call id: reservations and settlements": [
    [job()],
    [
      {
        before: [claim("queued")],
        time: null,
        batch: times(8, (i) => ({
          kind: "Charge",
          job: "running",
          call: 0,
          token: i % 3 === 0 ? "stale" : "current",
          amountCents: 1 + i,
          settled: i % 2 === 1
        }))
      }
    ]
  ],
  "8 claims of one queued job by 8 owners": [
    [job()],
    [{ before: [], time: null, batch: times(8, (i) => claim(0, i)) }]
  ],
  "8 submits with one request key, two inputs": [
    [job({ key: "key-1" })],
    [
      {
        before: [],
        time: null,
        batch: times(8, (i) => ({ kind: "Submit", specs: [job({ key: "key-0", input: i % 4 === 3 ? 1 : 0 })] }))
      }
    ]
  ],
  "settles, heartbeats and a cancel under one token, and a takeover of the ended lease": [
    [job()],
    [
      {
        before: [claim("queued", 0, 1_000)],
        time: { kind: "TickTo", job: "running", field: "leaseUntil", offset: 1 },
        batch: [
          { kind: "Settle", job: "running", token: "current", outcome: { _tag: "Complete", result: "done" } },
          { kind: "Settle", job: "running", token: "current", outcome: { _tag: "Fail", errorClass: "auth" } },
          {
            kind: "Settle",
            job: "running",
            token: "next",
            outcome: { _tag: "Retry", delayMs: 0, errorClass: "timeout" }
          },
          { kind: "Heartbeat", job: "running", token: "current", leaseMs: 3_000, progress: 0.5 },
          { kind: "Heartbeat", job: "running", token: "next", leaseMs: 3_000, progress: null },
          claim("running", 1),
          claim("running", 2),
          { kind: "Cancel", job: "running", tenant: "none" }
        ]
      }
    ]
  ],
  "claimNext racing claims over three due jobs": [
    [job(), job({ priority: 1 }), job()],
    [
      {
        before: [],
        time: null,
        batch: [
          ...times(4, (i): Command => ({ kind: "ClaimNext", owner: i, max: i === 0 ? 2 : 1, leaseMs: 3_000 })),
          claim(0, 4),
          claim(1, 5),
          claim(2, 6),
          { kind: "Charge", job: 0, call: 0, token: "current", amountCents: 1, settled: false }
        ]
      }
    ]
  ],
  "fair claimNext calls racing claims over two tenants": [
    [job(), job({ priority: 1 }), job({ tenant: 1 }), job({ tenant: 2 }), job({ tenant: 1 })],
    [
      {
        before: [{ kind: "ClaimNext", owner: 7, max: 1, leaseMs: 3_000, fair: true }],
        time: null,
        batch: [
          ...times(
            3,
            (i): Command => ({ kind: "ClaimNext", owner: i, max: i === 0 ? 2 : 1, leaseMs: 3_000, fair: true })
          ),
          claim(0, 4),
          claim(2, 5),
          { kind: "ClaimNext", owner: 6, max: 2, leaseMs: 3_000 }
        ]
      }
    ]
  ],
  "sweeps racing settles and heartbeats on ended leases": [
    [job(), job({ maxAttempts: 1 })],
    [
      {
        before: [claim(0, 0, 1_000), claim(1, 1, 1_000)],
        time: { kind: "Tick", ms: 1_001 },
        batch: [
          { kind: "Sweep", republishAfterMs: null, limit: null },
          { kind: "Sweep", republishAfterMs: 0, limit: 1 },
          { kind: "Settle", job: 0, token: "current", outcome: { _tag: "Complete", result: null } },
          { kind: "Settle", job: 1, token: "current", outcome: { _tag: "Release" } },
          { kind: "Heartbeat", job: 0, token: "current", leaseMs: 3_000, progress: null },
          claim(1, 2)
        ]
      }
    ]
  ],
  "replays of one failed job racing claims and a cancel": [
    [job({ maxAttempts: 1 })],
    [
      {
        before: [
          claim("queued"),
          { kind: "Settle", job: "running", token: "current", outcome: { _tag: "Fail", errorClass: "auth" } }
        ],
        time: null,
        batch: [
          ...times(4, (): Command => ({ kind: "Replay", job: 0 })),
          claim(0, 1),
          claim(0, 2),
          { kind: "Cancel", job: 0, tenant: "none" },
          { kind: "ClaimNext", owner: 3, max: 1, leaseMs: 3_000 }
        ]
      }
    ]
  ]
}
