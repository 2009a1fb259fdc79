/**
 * The dead-letter view: how the groups `Query.deadLetters` reads (one per error class and input hash) are shown. One
 * rule, here, for every backend and every screen:
 *
 * - a group of one job (a singleton) says nothing about its input that its error class does not: the singletons of an
 *   error class are collapsed into one group of that class (`inputHash: null`, `collapsed: true`) with their count,
 *   summed cost, latest failure and most recent job ids; groups of two or more jobs of one input stay as they are;
 * - the groups are sorted by `cost` (default), `count` or `recent` (latest failure), descending, each key breaking
 *   the others' ties, then by error class and input hash (a collapsed group before the inputs of its class), so the
 *   order is total and the same on every call;
 * - pages are cut by a keyset cursor: the sort key of the last group shown. The next page starts after that key, so
 *   a group that changes meanwhile neither repeats the page nor makes another group skip it.
 *
 * Everything here is a pure function of the groups read; `Client.deadLetterPage` reads them and adds each shown
 * group's most recent job.
 *
 * @since 0.5.0
 */
import { Either, Encoding } from "effect"
import type { ErrorClass } from "./ErrorClass.js"
import type { JobId } from "./Job.js"
import { type DeadLetterGroup, groupJobIdsLimit } from "./Query.js"

/**
 * The orders of the view: largest cost, largest count, or latest failure first.
 *
 * @since 0.5.0
 * @category models
 */
export type Sort = "cost" | "count" | "recent"

/**
 * The sorts, for a parameter's choices.
 *
 * @since 0.5.0
 * @category constants
 */
export const sorts: ReadonlyArray<Sort> = ["cost", "count", "recent"]

/**
 * One group as shown: a (errorClass, inputHash) group of two or more jobs, or the collapsed singletons of one error
 * class (`inputHash: null`, `collapsed: true`). `jobIds` are the group's most recent jobs first, at most
 * `Query.groupJobIdsLimit`; the first is the group's most recent job.
 *
 * @since 0.5.0
 * @category models
 */
export interface Summary {
  readonly errorClass: ErrorClass | null
  readonly inputHash: string | null
  readonly count: number
  readonly costCents: number
  readonly lastFailedAt: number
  readonly jobIds: ReadonlyArray<JobId>
  readonly collapsed: boolean
}

/**
 * Where a page starts: the sort key of the last group of the page before.
 *
 * @since 0.5.0
 * @category models
 */
export type Cursor = readonly [
  costCents: number,
  count: number,
  lastFailedAt: number,
  errorClass: string,
  input: string
]

/**
 * One page of the view, with the totals over every group (for "page k of n") and the cursor of the next page (`null`
 * on the last).
 *
 * @since 0.5.0
 * @category models
 */
export interface Page {
  readonly groups: ReadonlyArray<Summary>
  readonly next: string | null
  readonly totalGroups: number
  readonly totalJobs: number
  readonly totalCostCents: number
}

/**
 * The default number of groups on a page.
 *
 * @since 0.5.0
 * @category constants
 */
export const defaultLimit = 50

/** The error class and input parts of a key: a null class and a collapsed group's null input sort first. */
const keyOf = (group: Summary): Cursor => [
  group.costCents,
  group.count,
  group.lastFailedAt,
  group.errorClass === null ? "" : `c${group.errorClass}`,
  group.inputHash === null ? "" : `h${group.inputHash}`
]

/** Which numbers of a key decide, in turn, for each sort (all descending). */
const numbersOf: Readonly<Record<Sort, readonly [0 | 1 | 2, 0 | 1 | 2, 0 | 1 | 2]>> = {
  cost: [0, 1, 2],
  count: [1, 0, 2],
  recent: [2, 0, 1]
}

const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * The total order of a sort over keys: negative when `a` comes first.
 *
 * @since 0.5.0
 * @category combinators
 */
export const compareKeys =
  (sort: Sort) =>
  (a: Cursor, b: Cursor): number => {
    for (const i of numbersOf[sort]) if (a[i] !== b[i]) return b[i] - a[i]
    return compareText(a[3], b[3]) || compareText(a[4], b[4])
  }

/**
 * The cursor text of a key (URL-safe).
 *
 * @since 0.5.0
 * @category constructors
 */
export const encodeCursor = (key: Cursor): string => Encoding.encodeBase64Url(JSON.stringify(key))

/**
 * The key a cursor text names, or `undefined` when the text is not a cursor of this view.
 *
 * @since 0.5.0
 * @category constructors
 */
export const decodeCursor = (text: string): Cursor | undefined => {
  const decoded = Encoding.decodeBase64UrlString(text)
  if (Either.isLeft(decoded)) return undefined
  let value: unknown
  try {
    value = JSON.parse(decoded.right)
  } catch {
    return undefined
  }
  if (!Array.isArray(value) || value.length !== 5) return undefined
  const [cost, count, last, errorClass, input] = value as ReadonlyArray<unknown>
  const finite = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n)
  return finite(cost) && finite(count) && finite(last) && typeof errorClass === "string" && typeof input === "string"
    ? [cost, count, last, errorClass, input]
    : undefined
}

/**
 * The groups as shown, unsorted: groups of two or more jobs as they are, the singletons of each error class folded
 * into one collapsed group. A collapsed group's costs are summed most recent first, and its job ids are its
 * singletons' jobs, most recent first (equal times by input hash), at most `Query.groupJobIdsLimit`.
 *
 * @since 0.5.0
 * @category combinators
 */
export const collapse = (groups: ReadonlyArray<DeadLetterGroup>): ReadonlyArray<Summary> => {
  const shown: Array<Summary> = []
  const singletons = new Map<ErrorClass | null, Array<DeadLetterGroup>>()
  for (const group of groups) {
    if (group.count === 1) {
      const same = singletons.get(group.errorClass)
      if (same === undefined) singletons.set(group.errorClass, [group])
      else same.push(group)
    } else {
      shown.push({
        errorClass: group.errorClass,
        inputHash: group.inputHash,
        count: group.count,
        costCents: group.costCents,
        lastFailedAt: group.lastFailedAt,
        jobIds: group.jobIds.slice(0, groupJobIdsLimit),
        collapsed: false
      })
    }
  }
  for (const [errorClass, members] of singletons) {
    members.sort((a, b) => b.lastFailedAt - a.lastFailedAt || compareText(a.inputHash, b.inputHash))
    let costCents = 0
    for (const member of members) costCents += member.costCents
    shown.push({
      errorClass,
      inputHash: null,
      count: members.length,
      costCents,
      lastFailedAt: members[0]!.lastFailedAt,
      jobIds: members.slice(0, groupJobIdsLimit).flatMap((member) => member.jobIds.slice(0, 1)),
      collapsed: true
    })
  }
  return shown
}

/**
 * One page of the view over the groups read: `collapse`, sorted by `sort` (default `cost`), the groups after
 * `cursor` (a key from `decodeCursor`; none: from the start), at most `limit` (default 50) of them.
 *
 * @since 0.5.0
 * @category combinators
 */
export const page = (
  groups: ReadonlyArray<DeadLetterGroup>,
  options: {
    readonly sort?: Sort | undefined
    readonly limit?: number | undefined
    readonly cursor?: Cursor | undefined
  }
): Page => {
  const compare = compareKeys(options.sort ?? "cost")
  const limit = Math.max(1, Math.floor(options.limit ?? defaultLimit))
  const keyed = collapse(groups)
    .map((group) => ({ group, key: keyOf(group) }))
    .sort((a, b) => compare(a.key, b.key))
  const cursor = options.cursor
  const start = cursor === undefined ? 0 : keyed.findIndex((entry) => compare(entry.key, cursor) > 0)
  const from = start === -1 ? keyed.length : start
  const shown = keyed.slice(from, from + limit)
  let totalJobs = 0
  let totalCostCents = 0
  for (const { group } of keyed) {
    totalJobs += group.count
    totalCostCents += group.costCents
  }
  return {
    groups: shown.map((entry) => entry.group),
    next: from + limit < keyed.length ? encodeCursor(shown[shown.length - 1]!.key) : null,
    totalGroups: keyed.length,
    totalJobs,
    totalCostCents
  }
}
