/**
 * One tick of a worker's store writes (`ticks.ts`): the writes it carries by verb, each waiting for its answer, and
 * how a reply is shared out among them. Every write is answered once; a later answer is dropped.
 *
 * @internal
 */
import { Effect, Exit } from "effect"
import type { LeaseLost, StoreError } from "../../Errors.js"
import type {
  ChargeItem,
  ChargeResult,
  ClaimNextOptions,
  ClaimNextResult,
  Reply,
  SettleItem,
  SettleResult
} from "../../Store.js"
import { noResult } from "./store.js"

/** What a settlement or a charge gets back: the store time of its call and its result. */
export interface Answer<R> {
  readonly now: number
  readonly result: R
}

/** A write handed in and not yet answered: one item (a claim's is its options) and what its caller waits for. */
export interface Pending<I, A> {
  readonly item: I
  readonly veto: (() => LeaseLost | undefined) | undefined
  readonly resume: (answer: Effect.Effect<A, StoreError | LeaseLost>) => void
  answered: boolean
}

/** Answers a write once (a later answer, such as the end of a tick that already answered it, is dropped). */
export const answer = <I, A>(pending: Pending<I, A>, effect: Effect.Effect<A, StoreError | LeaseLost>): void => {
  if (pending.answered) return
  pending.answered = true
  pending.resume(effect)
}

/** The writes of one tick, by verb, each in the order they were handed in. */
export interface Tick {
  readonly settle: Array<Pending<SettleItem, Answer<SettleResult>>>
  readonly charge: Array<Pending<ChargeItem, Answer<ChargeResult>>>
  /** At most one claim. */
  readonly claim: Array<Pending<ClaimNextOptions, Reply<ClaimNextResult>>>
}

/** A tick with no write yet. */
export const emptyTick = (): Tick => ({ settle: [], charge: [], claim: [] })

/** How many writes the tick carries (a claim counts as one). */
export const sizeOf = (tick: Tick): number => tick.settle.length + tick.charge.length + tick.claim.length

/** Answers every write of the tick not answered yet. */
export const answerAll = (tick: Tick, effect: Effect.Effect<never>): void => {
  for (const write of tick.settle) answer(write, effect)
  for (const write of tick.charge) answer(write, effect)
  for (const write of tick.claim) answer(write, effect)
}

/** The items of `writes`, in order: what a call of their verb sends. */
export const itemsOf = <I, A>(writes: ReadonlyArray<Pending<I, A>>): Array<I> => writes.map((write) => write.item)

/** A reply of one result per item shared out among the writes that sent them, in order. */
export const shareOut = <I, R>(
  writes: ReadonlyArray<Pending<I, Answer<R>>>,
  exit: Exit.Exit<Reply<R>, StoreError>,
  operation: string
): void => {
  for (let i = 0; i < writes.length; i++) {
    if (Exit.isFailure(exit)) {
      answer(writes[i]!, Effect.failCause(exit.cause))
      continue
    }
    const result = exit.value.results[i]
    answer(
      writes[i]!,
      result === undefined ? Effect.fail(noResult(operation)()) : Effect.succeed({ now: exit.value.now, result })
    )
  }
}

/** A claim's reply is its one write's answer. */
export const answerClaims = (
  claims: ReadonlyArray<Pending<ClaimNextOptions, Reply<ClaimNextResult>>>,
  exit: Exit.Exit<Reply<ClaimNextResult>, StoreError>
): void => {
  for (const claim of claims) answer(claim, exit)
}

/** A verb's reply for one item alone, checked to have exactly one result. */
export const single = <R>(
  operation: string,
  call: Effect.Effect<Reply<R>, StoreError>
): Effect.Effect<Answer<R>, StoreError> =>
  Effect.flatMap(call, ({ now, results }) =>
    results.length === 1 ? Effect.succeed({ now, result: results[0]! }) : Effect.fail(noResult(operation)())
  )

/** Takes queued writes of one verb while the tick has room; vetoed ones are answered at once and left out. */
export const takeInto = <I, A>(from: Array<Pending<I, A>>, into: Array<Pending<I, A>>, room: number): number => {
  let taken = 0
  while (from.length > 0 && taken < room) {
    const write = from.shift()!
    const refused = write.veto?.()
    if (refused !== undefined) {
      answer(write, Effect.fail(refused))
      continue
    }
    into.push(write)
    taken += 1
  }
  return taken
}
