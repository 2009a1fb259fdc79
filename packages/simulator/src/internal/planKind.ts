/**
 * The kind of a plan, for the bench scripts: which of fleet limits, batches and a schedule it has. `bench:sim
 * --by-kind` prints its figures per kind, and `--kind` (in `bench.ts` and `opsites.ts`) keeps the plans of one.
 *
 * @internal
 */
import type { Plan } from "../Plan.js"

const parts = ["limits", "batches", "schedule"] as const

/** The kind a plan with none of the three has. */
const none = "none of them"

/**
 * A plan's kind as `bench:sim --by-kind` prints it: the parts it has, in the order limits, batches, schedule, joined
 * by ", " ("limits, schedule"), or "none of them".
 *
 * @internal
 */
export const planKind = (plan: Plan): string => {
  const has = {
    limits: plan.limits !== undefined,
    batches: plan.batches !== undefined && plan.batches.length > 0,
    schedule: plan.schedule !== undefined && plan.schedule !== null
  }
  return parts.filter((part) => has[part]).join(", ") || none
}

/**
 * The kind a `--kind` argument names, as `planKind` writes it: its parts in any order, separated by commas, plus
 * signs or spaces ("limits+batches", "schedule, limits"), or "none" (or "none of them") for a plan with none of the
 * three. Throws on any other word.
 *
 * @internal
 */
export const parseKind = (text: string): string => {
  const words = text
    .toLowerCase()
    .split(/[\s,+]+/)
    .filter((word) => word !== "")
  if (words.join(" ") === "none" || words.join(" ") === none) return none
  for (const word of words) {
    if (!(parts as ReadonlyArray<string>).includes(word)) {
      throw new Error(
        `unknown plan kind "${word}" in "${text}": use none, or limits, batches, schedule joined by + or ,`
      )
    }
  }
  if (words.length === 0) throw new Error(`no plan kind in "${text}"`)
  return parts.filter((part) => words.includes(part)).join(", ")
}

/**
 * The plans a bench script runs: the first `runs` that `draw` gives (draw `i` is the plan of run `i` of the run
 * set), or, with a `kind`, the first `runs` of that kind among them, drawing on until there are that many (at most
 * 100 draws per plan asked for; fewer found throws).
 *
 * @internal
 */
export const benchPlans = (draw: (i: number) => Plan, runs: number, kind?: string): Array<Plan> => {
  const plans: Array<Plan> = []
  for (let i = 0; plans.length < runs; i++) {
    if (kind !== undefined && i >= 100 * runs) {
      throw new Error(`only ${plans.length} plans of kind "${kind}" in the first ${i} drawn (asked for ${runs})`)
    }
    const plan = draw(i)
    if (kind === undefined || planKind(plan) === kind) plans.push(plan)
  }
  return plans
}
