/**
 * How a batch verb becomes statements. The Store contract applies the items of a batch "as if one after another";
 * one statement over all items applies them at once, which is the same thing exactly when no two items touch the
 * same job (or, for submit, the same request key). So a batch is cut into consecutive chunks in which no key
 * repeats, and the chunks run in order, each one statement: a later item then sees an earlier one's write.
 *
 * A statement answers each item, or says that its snapshot contradicts the miss (a concurrent writer won the row
 * between the snapshot and the write): those items run again, before the next chunk, a bounded number of times.
 *
 * Every statement of one call uses one store time: the first statement's (or the caller's `now`), passed to the
 * later ones, so the reply's `now` is the time every item of it was written at.
 *
 * @internal
 */
import { StoreError } from "@slowcall/core/Errors"
import type { Reply } from "@slowcall/core/Store"
import { Effect } from "effect"

/** How often an item whose miss contradicts its own snapshot is run again before the call gives up. */
export const RACE_RETRIES = 8

/**
 * Consecutive chunks of `items` (their indexes, in order) in which no key of `keysOf` repeats.
 *
 * @internal
 */
export const chunks = <I>(
  items: ReadonlyArray<I>,
  indexes: ReadonlyArray<number>,
  keysOf: (item: I) => ReadonlyArray<string>
): ReadonlyArray<ReadonlyArray<number>> => {
  const out: Array<Array<number>> = []
  let current: Array<number> = []
  let seen = new Set<string>()
  for (const index of indexes) {
    const keys = keysOf(items[index]!)
    if (keys.some((key) => seen.has(key))) {
      out.push(current)
      current = []
      seen = new Set()
    }
    current.push(index)
    for (const key of keys) seen.add(key)
  }
  if (current.length > 0) out.push(current)
  return out
}

/**
 * One statement's answer for a chunk: its store time and, per item in chunk order, the result or `undefined` (run
 * that item again).
 *
 * @internal
 */
export interface ChunkReply<R> {
  readonly now: number
  readonly results: ReadonlyArray<R | undefined>
}

/**
 * What a batch verb supplies: the keys that must not repeat within one statement, the answer for items that need
 * no statement (an id that cannot name a row), and the statement for a chunk at a store time (`null`: the server's).
 *
 * @internal
 */
export interface BatchSpec<I, R> {
  readonly operation: string
  readonly keys: (item: I) => ReadonlyArray<string>
  readonly local: (item: I) => R | undefined
  readonly statement: (chunk: ReadonlyArray<I>, now: number | null) => Effect.Effect<ChunkReply<R>, StoreError>
  /** Store time when no statement ran (an empty batch, or every item answered locally). */
  readonly readNow: Effect.Effect<number, StoreError>
}

/**
 * Runs a batch by `spec`: local answers, then the chunks in order, each with its race retries.
 *
 * @internal
 */
export const runBatch = <I, R>(
  spec: BatchSpec<I, R>,
  items: ReadonlyArray<I>,
  requestedNow: number | undefined
): Effect.Effect<Reply<R>, StoreError> =>
  Effect.gen(function* () {
    const results: Array<R | undefined> = items.map(spec.local)
    const pending = results.flatMap((result, index) => (result === undefined ? [index] : []))
    let now: number | null = requestedNow ?? null
    for (const chunk of chunks(items, pending, spec.keys)) {
      let todo = chunk
      for (let round = 0; todo.length > 0; round++) {
        if (round === RACE_RETRIES) {
          return yield* new StoreError({
            reason: "Conflict",
            operation: spec.operation,
            detail: "the row kept changing under concurrent writers"
          })
        }
        const reply = yield* spec.statement(
          todo.map((index) => items[index]!),
          now
        )
        now ??= reply.now
        const again: Array<number> = []
        todo.forEach((index, k) => {
          const result = reply.results[k]
          if (result === undefined) again.push(index)
          else results[index] = result
        })
        todo = again
      }
    }
    return { now: now ?? (yield* spec.readNow), results: results as ReadonlyArray<R> }
  })
