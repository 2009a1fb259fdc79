/**
 * `npm run bench:sim:sites`: where the Effect operations of the bench's runs come from, for deciding what to cut
 * (`bench:sim -- --count-ops` gives only the total). Over the bench's first `--runs` plans, it prints per run:
 * - by fiber: operations and fibers, each fiber named by the first function of this repository in the effect it
 *   started with (else by its first operation);
 * - by site: each operation by its kind and the source line of the function it carries (a `sync` thunk, a
 *   continuation, an `async` register, a `suspend` body), mapped through the bundle's source map;
 * - by nearest frame of this repository: the same, charged to the innermost continuation of this repository on the
 *   fiber's stack (what a library combinator was running for);
 * - Success and Failure steps by what returned them (a continuation that wrapped a plain value, a runtime-flags
 *   revert), masks and flag changes by whether the fiber was interruptible then, and fiber-by-site pairs.
 * `--trace N` prints every operation of plan N in order instead (fiber id, kind, site).
 *
 * It reads Effect's internals (operation fields, a fiber's continuation stack and flags) and the functions' source
 * positions through the inspector: a diagnostic for this repository's Effect version, not an API.
 *
 * `--kind K` (`limits`, `limits+batches`, `none`, ...: the kinds `bench:sim --by-kind` prints) takes the first `--runs`
 * plans of that kind in the same draws instead, to see one kind alone.
 *
 * Usage: node scripts/bundled.mjs packages/simulator/scripts/opsites.ts [--runs 100] [--top 60] [--trace N] [--kind K]
 */
import * as inspector from "node:inspector"
import { findSourceMap } from "node:module"
import { fileURLToPath } from "node:url"
import { faultKinds } from "@slowcall/simulator/Plan"
import { arbitraryFor, planOf, runAndCheck } from "@slowcall/simulator/Simulate"
import { Effect } from "effect"
import { AbstractSupervisor } from "effect/Supervisor"
import { benchPlans, parseKind } from "../src/internal/planKind.js"
import { mixSeed } from "../src/internal/prng.js"

const args = process.argv.slice(2)
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
const runs = flag("runs", 100)
const top = flag("top", 60)
const kindAt = args.indexOf("--kind")
const kind = kindAt >= 0 ? parseKind(args[kindAt + 1] ?? "") : undefined
const options = { seed: 1, runs, jobs: 20, workers: 4, faults: faultKinds, allFaults: true }
const arbitrary = arbitraryFor(options)
const plans = benchPlans((i) => planOf(arbitrary, mixSeed(1, i)), runs, kind)

const session = new inspector.Session()
session.connect()
const scripts = new Map<string, string>()
session.on("Debugger.scriptParsed", (m) => {
  scripts.set(m.params.scriptId, m.params.url)
})
session.post("Debugger.enable")
const post = <T>(method: string, params: object): T => {
  let out: unknown
  let failed: unknown
  session.post(method, params, (err, res) => {
    failed = err
    out = res
  })
  if (failed) throw failed
  return out as T
}
const g = globalThis as { __fn?: unknown }
const located = new WeakMap<object, string>()
const byText = new Map<string, string>()
const where = (fn: unknown): string => {
  if (typeof fn !== "function") return "-"
  const hit = located.get(fn)
  if (hit !== undefined) return hit
  const text = fn.toString()
  let site = byText.get(text)
  if (site === undefined) {
    g.__fn = fn
    const { result } = post<{ result: { objectId: string } }>("Runtime.evaluate", { expression: "globalThis.__fn" })
    const props = post<{ internalProperties?: Array<{ name: string; value: { value: any } }> }>(
      "Runtime.getProperties",
      { objectId: result.objectId, ownProperties: true }
    )
    const loc = props.internalProperties?.find((p) => p.name === "[[FunctionLocation]]")?.value.value
    site = "?"
    if (loc !== undefined) {
      const url = scripts.get(loc.scriptId) ?? "?"
      site = `${url}:${loc.lineNumber + 1}`
      if (url.startsWith("file:")) {
        const map = findSourceMap(fileURLToPath(url))
        const entry = map?.findEntry(loc.lineNumber, loc.columnNumber) as
          | { originalSource?: string; originalLine?: number }
          | undefined
        if (entry?.originalSource !== undefined) {
          const o = entry.originalSource
          const at = o.lastIndexOf("/packages/")
          const source =
            at >= 0 && !o.includes("node_modules/effect/") ? o.slice(at + 1) : o.replace(/^.*?\/node_modules\//, "")
          site = `${source}:${(entry.originalLine ?? 0) + 1}`
        }
      }
    }
    site = `${site}  ${text.replace(/\s+/g, " ").slice(0, 70)}`
    byText.set(text, site)
  }
  located.set(fn, site)
  return site
}
const fnOf = (effect: any): unknown => {
  switch (effect?._op) {
    case "OnSuccess":
    case "OnFailure":
    case "OnSuccessAndFailure":
      return effect.effect_instruction_i1 ?? effect.effect_instruction_i2
    case "Sync":
    case "Async":
    case "Commit":
      return typeof effect.commit === "function" && !("_tag" in effect) ? effect.commit : effect.effect_instruction_i0
    case "WithRuntime":
    case "Yield":
      return effect.effect_instruction_i0
    default:
      return typeof effect?.effect_instruction_i0 === "function" ? effect.effect_instruction_i0 : undefined
  }
}
const ours = (effect: any, depth: number): string | undefined => {
  if (effect === null || typeof effect !== "object" || depth > 6) return undefined
  for (const k of ["effect_instruction_i0", "effect_instruction_i1", "effect_instruction_i2"]) {
    const v = effect[k]
    if (typeof v === "function") {
      const s = where(v)
      if (s.startsWith("packages/")) return s
    }
  }
  for (const k of ["effect_instruction_i0", "effect_instruction_i1"]) {
    const inner = ours(effect[k], depth + 1)
    if (inner !== undefined) return inner
  }
  return undefined
}

const userFrame = (fiber: any, own: string): string => {
  if (own.startsWith("packages/")) return own
  const stack: Array<any> = fiber._stack ?? []
  for (let i = stack.length - 1; i >= 0; i--) {
    const frame = stack[i]
    for (const k of ["effect_instruction_i1", "effect_instruction_i2"]) {
      const s = where(frame?.[k])
      if (s.startsWith("packages/")) return `^ ${s}`
    }
  }
  return `lib ${own}`
}
const detail = (effect: any): string => {
  if (effect?._op === "Success") {
    const v = effect.effect_instruction_i0 ?? effect.value
    return v === undefined ? "undefined" : `${v?.constructor?.name ?? typeof v}${v?._tag ? `:${v._tag}` : ""}`
  }
  if (effect?._op === "Commit" && typeof effect.effect_instruction_i0 !== "function") {
    return `${effect?.constructor?.name}${effect?._tag ? `:${effect._tag}` : ""}`
  }
  return ""
}
const lastOf = new WeakMap<object, { kind: string; site: string; top: unknown }>()
const successFrom = new Map<string, number>()
const inclusive = new Map<string, number>()
const masks = new Map<string, number>()
const perFiber = new Map<string, number>()
const details = new Map<string, number>()
const bySite = new Map<string, number>()
const byFiber = new Map<string, number>()
const fibersBy = new Map<string, number>()
const fiberName = new WeakMap<object, string>()
let ops = 0
class Sites extends AbstractSupervisor<void> {
  readonly value = Effect.void
  override onStart(_c: unknown, effect: unknown, parent: unknown, fiber: object): void {
    // `parent` is an Option of the forking fiber; a root fiber (or one forked from a runtime) has none.
    const forker = (parent as any)?.value ?? {}
    const name = ours(effect, 0) ?? `(${(effect as any)?._op}) forked at ${userFrame(forker, "-")}`
    fiberName.set(fiber, name)
    fibersBy.set(name, (fibersBy.get(name) ?? 0) + 1)
  }
  override onEffect(fiber: object, effect: any): void {
    ops++
    if (tracing) {
      const id = (fiber as any).id?.().id ?? "?"
      trace.push(`${String(id).padStart(5)} ${String(effect?._op).padEnd(20)} ${where(fnOf(effect))} ${detail(effect)}`)
    }
    const key = `${String(effect?._op).padEnd(20)} ${where(fnOf(effect))}`
    bySite.set(key, (bySite.get(key) ?? 0) + 1)
    const stack: Array<any> = (fiber as any)._stack ?? []
    const prev = lastOf.get(fiber)
    if (effect?._op === "Success" || effect?._op === "Failure") {
      const from =
        prev === undefined
          ? "(fiber start)"
          : ["OnSuccess", "OnFailure", "OnSuccessAndFailure", "UpdateRuntimeFlags"].includes(prev.kind)
            ? `inner of ${prev.kind} ${prev.site}`
            : `returned by ${where(
                (prev.top as any)?._op === "OnSuccessAndFailure"
                  ? (prev.top as any).effect_instruction_i2
                  : (prev.top as any)?.effect_instruction_i1
              )} (after ${prev.kind})`
      const k2 = `${effect._op} ${from}`
      successFrom.set(k2, (successFrom.get(k2) ?? 0) + 1)
    }
    lastOf.set(fiber, { kind: effect?._op, site: where(fnOf(effect)), top: stack[stack.length - 1] })
    const u = userFrame(fiber, where(fnOf(effect)))
    if (effect?._op === "Commit" || effect?._op === "UpdateRuntimeFlags") {
      const own = where(fnOf(effect))
      // `uninterruptibleMask` is a custom Commit whose body builds the flags operation.
      if (effect?._op === "UpdateRuntimeFlags" || own.includes("OP_UPDATE_RUN")) {
        const interruptible = ((fiber as any).currentRuntimeFlags & 1) !== 0
        const frame = userFrame(fiber, "-")
        const context =
          frame === "lib -"
            ? `in ${(fiberName.get(fiber) ?? "(root)").slice(0, 50)} after ${prev?.kind} ${prev?.site.slice(0, 90)}`
            : frame
        const mk = `${effect._op === "Commit" ? "mask" : "flags"} ${interruptible ? "INTERRUPTIBLE" : "uninterruptible"} ${context}`
        masks.set(mk, (masks.get(mk) ?? 0) + 1)
      }
    }
    inclusive.set(u, (inclusive.get(u) ?? 0) + 1)
    const d = detail(effect)
    if (d !== "") details.set(`${effect._op} ${d}`, (details.get(`${effect._op} ${d}`) ?? 0) + 1)
    const f = fiberName.get(fiber) ?? "(root)"
    const fk = `${f.slice(0, 60)} | ${key}`
    perFiber.set(fk, (perFiber.get(fk) ?? 0) + 1)
    byFiber.set(f, (byFiber.get(f) ?? 0) + 1)
  }
}
const sites = new Sites()
const traceRun = flag("trace", -1)
let tracing = false
const trace: Array<string> = []
if (traceRun >= 0) {
  tracing = true
  runAndCheck(plans[traceRun]!, { supervisor: sites })
  console.log(trace.join("\n").replace(/node_modules\/.cache\/slowcall-bundles\//g, ""))
  process.exit(0)
}
for (const plan of plans) runAndCheck(plan, { supervisor: sites })
const show = (title: string, m: Map<string, number>, extra?: Map<string, number>) => {
  console.log(`\n## ${title}`)
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    const more = extra === undefined ? "" : ` fibers/run ${((extra.get(k) ?? 0) / runs).toFixed(1).padStart(5)}`
    console.log(`${(v / runs).toFixed(0).padStart(6)}${more}  ${k}`)
  }
}
console.log(`ops/run ${(ops / runs).toFixed(0)}${kind === undefined ? "" : ` (plans of kind "${kind}")`}`)
show("by fiber", byFiber, fibersBy)
show("by site", bySite)
show("by nearest frame of this repository", inclusive)
show("Success values and Commit objects", details)
show("Success and Failure: where from", successFrom)
show("masks and flag changes: was the fiber interruptible", masks)
show("by fiber and site", perFiber)
