/**
 * The dead-letter view (`DeadLetters.ts`): singletons collapse into their error class, the three sorts are total
 * orders, and the keyset cursor pages through every group exactly once, also when groups change between pages.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as DeadLetters from "../src/DeadLetters.js"
import type { ErrorClass } from "../src/ErrorClass.js"
import type { JobId } from "../src/Job.js"
import { type DeadLetterGroup, groupJobIdsLimit } from "../src/Query.js"

const id = (n: number): JobId => `00000000-0000-7000-8000-${String(n).padStart(12, "0")}` as JobId

const group = (
  errorClass: ErrorClass | null,
  inputHash: string,
  count: number,
  costCents: number,
  lastFailedAt: number,
  ids: ReadonlyArray<number> = [lastFailedAt]
): DeadLetterGroup => ({ errorClass, inputHash, count, costCents, lastFailedAt, jobIds: ids.map(id) })

describe("DeadLetters.collapse", () => {
  it("folds the singletons of each error class into one group; groups of several stay", () => {
    const groups = [
      group("timeout", "aa", 3, 9, 50, [50, 40, 30]),
      group("timeout", "bb", 1, 2, 20),
      group("timeout", "cc", 1, 4, 60),
      group("auth", "dd", 1, 1, 10),
      group(null, "ee", 1, 0.5, 5)
    ]

    const shown = DeadLetters.collapse(groups)

    expect(shown).toEqual([
      {
        errorClass: "timeout",
        inputHash: "aa",
        count: 3,
        costCents: 9,
        lastFailedAt: 50,
        jobIds: [id(50), id(40), id(30)],
        collapsed: false
      },
      {
        errorClass: "timeout",
        inputHash: null,
        count: 2,
        costCents: 6,
        lastFailedAt: 60,
        jobIds: [id(60), id(20)],
        collapsed: true
      },
      {
        errorClass: "auth",
        inputHash: null,
        count: 1,
        costCents: 1,
        lastFailedAt: 10,
        jobIds: [id(10)],
        collapsed: true
      },
      { errorClass: null, inputHash: null, count: 1, costCents: 0.5, lastFailedAt: 5, jobIds: [id(5)], collapsed: true }
    ])
  })

  it("a collapsed group keeps the ids of its most recent singletons, at most the limit", () => {
    const singles = Array.from({ length: groupJobIdsLimit + 5 }, (_, i) => group("timeout", `h${i}`, 1, 1, i))

    const [collapsed] = DeadLetters.collapse(singles)

    expect(collapsed!.count).toBe(groupJobIdsLimit + 5)
    expect(collapsed!.jobIds).toHaveLength(groupJobIdsLimit)
    expect(collapsed!.jobIds[0]).toBe(id(groupJobIdsLimit + 4))
  })
})

describe("DeadLetters.page", () => {
  const groups = [
    group("timeout", "aa", 5, 10, 100),
    group("auth", "bb", 2, 30, 300),
    group("timeout", "cc", 9, 10, 200),
    group("rate_limited", "dd", 1, 1, 400)
  ]
  const names = (page: DeadLetters.Page) => page.groups.map((g) => `${g.errorClass}/${g.inputHash ?? "*"}`)

  it("sorts by cost by default, then count, then latest failure; by count; by latest failure", () => {
    expect(names(DeadLetters.page(groups, {}))).toEqual(["auth/bb", "timeout/cc", "timeout/aa", "rate_limited/*"])
    expect(names(DeadLetters.page(groups, { sort: "count" }))).toEqual([
      "timeout/cc",
      "timeout/aa",
      "auth/bb",
      "rate_limited/*"
    ])
    expect(names(DeadLetters.page(groups, { sort: "recent" }))).toEqual([
      "rate_limited/*",
      "auth/bb",
      "timeout/cc",
      "timeout/aa"
    ])
  })

  it("pages with a cursor and counts every group and job", () => {
    const first = DeadLetters.page(groups, { limit: 3 })
    const second = DeadLetters.page(groups, { limit: 3, cursor: DeadLetters.decodeCursor(first.next!) })

    expect(names(first)).toEqual(["auth/bb", "timeout/cc", "timeout/aa"])
    expect(names(second)).toEqual(["rate_limited/*"])
    expect(second.next).toBeNull()
    expect(first).toMatchObject({ totalGroups: 4, totalJobs: 17, totalCostCents: 51 })
    expect(DeadLetters.page([], {})).toEqual({
      groups: [],
      next: null,
      totalGroups: 0,
      totalJobs: 0,
      totalCostCents: 0
    })
  })

  it("a cursor is refused unless it is one: garbage, wrong shapes, non-finite numbers", () => {
    expect(DeadLetters.decodeCursor(DeadLetters.encodeCursor([1, 2, 3, "ctimeout", "haa"]))).toEqual([
      1,
      2,
      3,
      "ctimeout",
      "haa"
    ])
    for (const text of ["", "not base64 !", DeadLetters.encodeCursor([1, 2] as never), "WzEsMiwzLDQsNV0"]) {
      expect(DeadLetters.decodeCursor(text), text).toBeUndefined()
    }
  })

  it("property: pages in any sort and size list every group once, in order, whatever changes behind the cursor", () => {
    const classes: ReadonlyArray<ErrorClass> = ["timeout", "auth", "rate_limited"]
    const arbitraryGroups = fc
      .uniqueArray(
        fc.record({
          errorClass: fc.constantFrom(...classes),
          inputHash: fc.constantFrom("a", "b", "c", "d", "e", "f"),
          count: fc.integer({ min: 1, max: 4 }),
          costCents: fc.constantFrom(0, 1, 2.5, 4),
          lastFailedAt: fc.integer({ min: 0, max: 5 })
        }),
        { selector: (g) => `${g.errorClass}/${g.inputHash}`, maxLength: 14 }
      )
      .map((list) => list.map((g) => group(g.errorClass, g.inputHash, g.count, g.costCents, g.lastFailedAt)))
    fc.assert(
      fc.property(
        arbitraryGroups,
        fc.constantFrom<DeadLetters.Sort>(...DeadLetters.sorts),
        fc.integer({ min: 1, max: 4 }),
        (all, sort, limit) => {
          const whole = DeadLetters.page(all, { sort, limit: 1_000 })
          const seen: Array<DeadLetters.Summary> = []
          let cursor: DeadLetters.Cursor | undefined
          for (let i = 0; i <= all.length; i++) {
            const page = DeadLetters.page(all, { sort, limit, cursor })
            seen.push(...page.groups)
            if (page.next === null) break
            cursor = DeadLetters.decodeCursor(page.next)
            expect(cursor).toBeDefined()
          }
          expect(seen).toEqual(whole.groups)
          expect(whole.totalGroups).toBe(whole.groups.length)
          // A group shown on an earlier page that changes is not shown again; the rest still come.
          const firstPage = DeadLetters.page(all, { sort, limit })
          if (firstPage.next !== null) {
            const moved = firstPage.groups[0]!
            const changed = all.map((g) =>
              moved.inputHash !== null && g.inputHash === moved.inputHash && g.errorClass === moved.errorClass
                ? { ...g, count: g.count + 1, costCents: g.costCents - 100, lastFailedAt: g.lastFailedAt - 100 }
                : g
            )
            const rest = DeadLetters.page(changed, {
              sort,
              limit: 1_000,
              cursor: DeadLetters.decodeCursor(firstPage.next)
            })
            const key = (g: DeadLetters.Summary) => `${g.errorClass}/${g.inputHash}`
            const expected = whole.groups.slice(firstPage.groups.length).map(key)
            expect(rest.groups.map(key).filter((k) => k !== key(moved))).toEqual(expected)
          }
        }
      ),
      { numRuns: 500 }
    )
  })
})
