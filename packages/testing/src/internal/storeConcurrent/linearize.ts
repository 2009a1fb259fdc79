/**
 * A linearizability checker over one recorded window of concurrent operations, in the manner of Wing & Gong's search
 * with Lowe's and Porcupine's memoization: find an order of the operations that respects real time (an operation
 * that returned before another was invoked comes first), in which each operation, applied to the model state its
 * predecessors left, gives the reply the backend gave, and whose end state the backend's observed state confirms.
 *
 * The search is a depth-first walk over (set of operations placed, model state). A pair met before is not walked
 * again, so commuting operations cost one path, not all their orders; the walk is bounded by `maxNodes`. It returns
 * every distinct end state that explains the window (usually one; several only when the backend's observable state
 * cannot tell them apart), or, when none does (or the bound cut the search short), the deepest place the search reached and why every operation that
 * could come next there was refused.
 *
 * The model is abstract: a state, a way to apply an operation to a copy of it (giving the next state or the reason
 * the reply differs), and a key that is equal for equal states.
 *
 * @internal
 */

/** One operation of a window: when it was invoked and when its reply arrived (any monotonic clock, one per window). */
export interface Timed {
  readonly invokedAt: number
  readonly returnedAt: number
}

/** How the checker reads a model. */
export interface Model<S, O extends Timed> {
  /**
   * Applies `op` to a copy of `state`: the next state, or why the backend's reply cannot come from `state` (a
   * thunk: the reason is only read for a report).
   */
  readonly step: (state: S, op: O, index: number) => { readonly state: S } | { readonly refused: () => string }
  /**
   * Whether `op` writes nothing in every state where it gives its reply (a read, a refused write). Such an operation
   * is placed as soon as it fits and the search does not branch on it: if any order explains the window, one that
   * places it there does too, since it leaves the state as it found it.
   */
  readonly inert: (op: O) => boolean
  /** A key equal for equal states and different for different ones. */
  readonly key: (state: S) => string
  /** Whether an end state agrees with what the backend holds after the window: undefined, or the difference. */
  readonly observe: (state: S) => string | undefined
}

/** Why no order explained the window. */
export interface Unexplained {
  /** The longest order the search could place (indexes into the window's operations). */
  readonly deepest: ReadonlyArray<number>
  /** At the deepest place: each operation that was allowed next and why its reply refused it. */
  readonly refusals: ReadonlyArray<{ readonly index: number; readonly reason: string }>
  /** When every operation was placed in some order but no end state matched the backend: the first difference. */
  readonly observed: string | undefined
  /** The search stopped at `maxNodes` without an answer. */
  readonly exhausted: boolean
}

/** What the search found: the end states that explain the window, each with one order that reaches it. */
export type Verdict<S> =
  | {
      readonly _tag: "Linearizable"
      readonly ends: ReadonlyArray<{ readonly state: S; readonly order: ReadonlyArray<number> }>
      readonly nodes: number
    }
  | ({ readonly _tag: "NotLinearizable"; readonly nodes: number } & Unexplained)

/**
 * Checks one window of operations against the model, from every start state the earlier windows left.
 *
 * @internal
 */
export const linearize = <S, O extends Timed>(
  model: Model<S, O>,
  starts: ReadonlyArray<S>,
  ops: ReadonlyArray<O>,
  maxNodes = 200_000
): Verdict<S> => {
  const n = ops.length
  if (n > 30) throw new Error(`a window of ${n} operations is too large to search`)
  // must[j]: the operations that returned before j was invoked, as a bit mask.
  const must = ops.map((op) =>
    ops.reduce((mask, other, i) => (other.returnedAt < op.invokedAt ? mask | (1 << i) : mask), 0)
  )
  const full = n === 0 ? 0 : 2 ** n - 1
  const inert = ops.map((op) => model.inert(op))
  const seen = new Set<string>()
  const ends = new Map<string, { readonly state: S; readonly order: ReadonlyArray<number> }>()
  const order: Array<number> = []
  let nodes = 0
  let exhausted = false
  let deepest: ReadonlyArray<number> = []
  let refusals: Array<{ readonly index: number; readonly reason: string }> = []
  let observed: string | undefined

  const walk = (state: S, placed: number): void => {
    if (placed === full) {
      const key = model.key(state)
      if (ends.has(key)) return
      const difference = model.observe(state)
      if (difference === undefined) ends.set(key, { state, order: [...order] })
      else observed ??= difference
      return
    }
    const here: Array<{ readonly index: number; readonly reason: () => string }> = []
    for (let i = 0; i < n; i++) {
      if ((placed & (1 << i)) !== 0 || (must[i]! & placed) !== must[i]) continue
      if (nodes >= maxNodes) {
        exhausted = true
        return
      }
      nodes += 1
      const next = model.step(state, ops[i]!, i)
      if ("refused" in next) {
        here.push({ index: i, reason: next.refused })
        continue
      }
      const at = placed | (1 << i)
      const key = `${at}|${model.key(next.state)}`
      if (seen.has(key)) {
        if (inert[i]) return
        continue
      }
      seen.add(key)
      order.push(i)
      walk(next.state, at)
      order.pop()
      if (inert[i]) return
    }
    if (here.length > 0 && order.length >= deepest.length) {
      deepest = [...order]
      refusals = here.map(({ index, reason }) => ({ index, reason: reason() }))
    }
  }

  for (const start of starts) walk(start, 0)
  // A cut search may have missed end states a later window needs, so it never passes, even with ends in hand.
  if (ends.size > 0 && !exhausted) return { _tag: "Linearizable", ends: [...ends.values()], nodes }
  return { _tag: "NotLinearizable", nodes, deepest, refusals, observed, exhausted }
}
