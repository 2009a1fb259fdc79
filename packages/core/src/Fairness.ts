/**
 * Fair shares across tenants: the order in which `Store.claimNext` with `fair` picks due jobs, stated once. The
 * memory Store is built from these functions; the Postgres statement and the Redis script are atomic versions of
 * them, checked against them by the model-based property in `@slowcall/testing`.
 *
 * The rule is **weighted least attained service with decay**. Per (queue, tenant) the store keeps the tenant's
 * service: every job a fair claim picks for the tenant adds `1 / weight`, and service decays by half every
 * `halfLifeMs`. A fair claim takes, one pick after another, the due job at the head of the tenant with the least
 * decayed service; within a tenant, jobs keep today's order (highest priority, then earliest `runAfter`, then
 * insertion). Equal service is broken by that same order of the tenants' head jobs, so equal weights with equal
 * history alternate (round robin), and a priority still wins between tenants that have had the same service.
 *
 * Why attained service and not plain alternation: a tenant that arrives while another has a backlog has received no
 * service, so it is served first until its service catches up with the others' (decayed) service, instead of
 * taking only an equal share of what is left. That is what keeps an interactive tenant's wait short behind a flood:
 * with 10 claims per second going to a flood tenant for 10 s and a half-life of 30 s, the flood's service is about
 * 90, so a newcomer's next 90 picks (divided by its weight) come first. The bound the other way: a tenant is never
 * locked out for longer than it takes the others' service to pass its own, and its own service halves every
 * half-life while it waits, so a flood tenant keeps getting every pick no one else wants (work-conserving) and its
 * weight's share of the picks while others are backlogged for as long.
 *
 * Decay is applied in steps of `halfLifeMs / 16` counted from the epoch of store time (so all tenants decay at the
 * same instants), by factors that are exact powers of two times one of 16 constants (`decayFactors`): every backend
 * computes bit for bit the same service with plain IEEE arithmetic, never a library `pow` of a fraction. After 60
 * half-lives a service counts as none.
 *
 * What a pick counts is a claim, not a model call: a job claimed and then throttled by its resource, or settled by
 * the claim (deadline, budget, attempts) counts as one pick for its tenant.
 *
 * @since 0.6.0
 */

/**
 * The `fair` option of `Store.claimNext`: the weight of each named tenant, the weight of every other tenant (and
 * of jobs with no tenant), and the half-life of attained service. Weights are relative: a tenant of weight 2 gets
 * twice the picks of a tenant of weight 1 while both are backlogged.
 *
 * @since 0.6.0
 * @category models
 */
export interface FairOptions {
  readonly weights?: Readonly<Record<string, number>> | undefined
  /** Default 1. */
  readonly defaultWeight?: number | undefined
  /** Default 30 s. */
  readonly halfLifeMs?: number | undefined
}

/**
 * Defaults: weight 1, half-life 30 s; decay in 16 steps per half-life; a service older than 60 half-lives is none.
 *
 * @since 0.6.0
 * @category rules
 */
export const defaults = { defaultWeight: 1, halfLifeMs: 30_000, steps: 16, forgetAfter: 60 } as const

/**
 * `2 ** (-r / 16)` for r = 0..15, as literal doubles: the fractional part of a decay. Backends splice these exact
 * values (their shortest decimal form) into their SQL and Lua.
 *
 * @since 0.6.0
 * @category rules
 */
export const decayFactors: ReadonlyArray<number> = [
  1, 0.9576032806985737, 0.9170040432046712, 0.8781260801866497, 0.8408964152537146, 0.8052451659746271,
  0.7711054127039705, 0.7384130729697497, 0.7071067811865475, 0.6771277734684463, 0.6484197773255048, 0.620928906036742,
  0.5946035575013605, 0.5693943173783458, 0.5452538663326288, 0.5221368912137069
]

/**
 * A tenant's attained service as a store keeps it: the value and the store time it was last written at.
 *
 * @since 0.6.0
 * @category models
 */
export interface Service {
  readonly service: number
  readonly at: number
}

const WEIGHT_MIN = 1e-6
const WEIGHT_MAX = 1e6

/**
 * What is wrong with `fair`, or `undefined`: every weight and the default weight must be finite numbers from 1e-6
 * to 1e6, the half-life a finite number of milliseconds from 16 to one year. A store refuses a claim with a bad
 * `fair` (`StoreError` with reason `Constraint`) before writing anything.
 *
 * @since 0.6.0
 * @category rules
 */
export const problem = (fair: FairOptions): string | undefined => {
  const weight = (value: unknown): boolean =>
    typeof value === "number" && Number.isFinite(value) && value >= WEIGHT_MIN && value <= WEIGHT_MAX
  if (fair.defaultWeight !== undefined && !weight(fair.defaultWeight)) {
    return "fair.defaultWeight must be a number from 1e-6 to 1e6"
  }
  if (fair.weights !== undefined) {
    if (typeof fair.weights !== "object" || fair.weights === null) return "fair.weights must be an object"
    for (const [tenant, value] of Object.entries(fair.weights)) {
      if (!weight(value)) return `fair.weights[${JSON.stringify(tenant)}] must be a number from 1e-6 to 1e6`
    }
  }
  const h = fair.halfLifeMs
  if (h !== undefined && !(typeof h === "number" && Number.isFinite(h) && h >= 16 && h <= 31_536_000_000)) {
    return "fair.halfLifeMs must be a number of milliseconds from 16 to 31536000000"
  }
  return undefined
}

/**
 * The weight of a tenant (`null`: jobs with no tenant, which share the default weight as one tenant).
 *
 * @since 0.6.0
 * @category rules
 */
export const weightOf = (fair: FairOptions, tenant: string | null): number => {
  const weights = fair.weights
  const named =
    tenant === null || weights === undefined || !Object.hasOwn(weights, tenant) ? undefined : weights[tenant]
  return named ?? fair.defaultWeight ?? defaults.defaultWeight
}

/**
 * The decay step of a half-life: store time is cut into steps of this length from the epoch.
 *
 * @since 0.6.0
 * @category rules
 */
export const stepMs = (fair: FairOptions): number => (fair.halfLifeMs ?? defaults.halfLifeMs) / defaults.steps

/**
 * A service decayed to `now`: `d` whole steps between the step of `at` and the step of `now` (none when the clock
 * went back) multiply it by `decayFactors[d % 16]`, then by `2 ** -floor(d / 16)`; from 60 half-lives on it is 0.
 * Exactly these operations in this order, so that every backend gets the same double.
 *
 * @since 0.6.0
 * @category rules
 */
export const decayed = (service: Service | undefined, now: number, step: number): number => {
  if (service === undefined) return 0
  const d = Math.max(0, Math.floor(now / step) - Math.floor(service.at / step))
  const q = Math.floor(d / defaults.steps)
  if (q >= defaults.forgetAfter) return 0
  return service.service * decayFactors[d - q * defaults.steps]! * 2 ** -q
}

/**
 * A due job a fair claim may pick, as the order needs it.
 *
 * @since 0.6.0
 * @category models
 */
export interface Candidate {
  readonly tenant: string | null
  readonly priority: number
  readonly runAfter: number
  /** Insertion order in the store. */
  readonly seq: number
}

/** Today's order: highest priority, then earliest runAfter, then insertion. */
const byJobOrder = (a: Candidate, b: Candidate): number =>
  b.priority - a.priority || a.runAfter - b.runAfter || a.seq - b.seq

/**
 * The picks of one fair claim at `now` of at most `max` jobs among `candidates` (every due job the claim may take,
 * in any order), and the service each tenant that got picks has after it. The k-th job (from 0) of a tenant in
 * today's order has the key `decayed + k / weight`; the picks are the `max` smallest keys, equal keys in today's
 * order of the jobs. That is the same as picking one job at a time from the tenant with the least service, adding
 * `1 / weight` per pick. A tenant with `n` picks ends with service `decayed + n / weight` at `now`; the others keep
 * theirs as they were.
 *
 * @since 0.6.0
 * @category rules
 */
export const pick = <C extends Candidate>(options: {
  readonly candidates: ReadonlyArray<C>
  readonly service: (tenant: string | null) => Service | undefined
  readonly fair: FairOptions
  readonly now: number
  readonly max: number
  /**
   * Candidates the claim must pass over (rows another writer holds at that moment): they keep their rank in their
   * tenant's order, so the jobs behind them keep their keys, but are not picked. A store that never passes over a
   * row leaves it out.
   */
  readonly passOver?: ((candidate: C) => boolean) | undefined
}): { readonly picks: ReadonlyArray<C>; readonly services: ReadonlyMap<string | null, Service> } => {
  const step = stepMs(options.fair)
  const max = Math.max(0, Math.floor(options.max))
  const byTenant = new Map<string | null, Array<C>>()
  for (const candidate of options.candidates) {
    const list = byTenant.get(candidate.tenant)
    if (list === undefined) byTenant.set(candidate.tenant, [candidate])
    else list.push(candidate)
  }
  const keyed: Array<{ readonly candidate: C; readonly key: number }> = []
  const base = new Map<string | null, { readonly d: number; readonly w: number }>()
  for (const [tenant, list] of byTenant) {
    list.sort(byJobOrder)
    const d = decayed(options.service(tenant), options.now, step)
    const w = weightOf(options.fair, tenant)
    base.set(tenant, { d, w })
    const room = Math.min(list.length, max)
    for (let k = 0; k < room; k++) keyed.push({ candidate: list[k]!, key: d + k / w })
  }
  keyed.sort((a, b) => a.key - b.key || byJobOrder(a.candidate, b.candidate))
  const passOver = options.passOver
  const open = passOver === undefined ? keyed : keyed.filter((entry) => !passOver(entry.candidate))
  const picks = open.slice(0, max).map((entry) => entry.candidate)
  const counts = new Map<string | null, number>()
  for (const p of picks) counts.set(p.tenant, (counts.get(p.tenant) ?? 0) + 1)
  const services = new Map<string | null, Service>()
  for (const [tenant, n] of counts) {
    const { d, w } = base.get(tenant)!
    services.set(tenant, { service: d + n / w, at: options.now })
  }
  return { picks, services }
}
