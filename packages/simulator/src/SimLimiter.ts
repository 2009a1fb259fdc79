/**
 * SimLimiter: a proxy around a real fleet Limiter (the in-memory one, in store time) that records every item it
 * applies, one `limit` event per item with its result and the live permits the Limiter counted after it, and injects
 * faults at the point `limiter.apply`: a clean failure before the write (F5), an applied write whose reply is lost
 * (F6), a write applied twice, as a client that sent it again after a lost reply would (F2: every verb must be safe
 * to repeat as sent), a slow call (F7), and the store's outages (F21); a worker's `read` (which writes nothing) at the
 * point `limiter.read` fails cleanly (F5, an outage) or is slow (F7). A paused process sends nothing until it runs
 * again and a crashed one never. Operators' resumes are recorded too.
 *
 * @since 0.4.0
 */
import { StoreError } from "@slowcall/core/Errors"
import type * as Limiter from "@slowcall/core/Limiter"
import { Effect, Random } from "effect"
import type { History, LimitEvent } from "./History.js"
import { type Actor, type Faults, passGate } from "./internal/world.js"
import type { FaultKind } from "./Plan.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * What the proxy needs from its world.
 *
 * @since 0.4.0
 * @category models
 */
export interface SimLimiterEnv {
  readonly actor: Actor
  readonly history: History
  readonly faults: Faults
  readonly clock: VirtualClock
}

const limiterFaults: ReadonlyArray<FaultKind> = ["F2", "F5", "F6", "F7"]
const readFaults: ReadonlyArray<FaultKind> = ["F5", "F7"]

const refused = new StoreError({ reason: "Connection", operation: "limiter.apply", detail: "injected: not applied" })
const readRefused = new StoreError({ reason: "Connection", operation: "limiter.read", detail: "injected: no reply" })
const lost = new StoreError({
  reason: "Ambiguous",
  operation: "limiter.apply",
  detail: "injected: the write applied but the reply was lost"
})

const viewOf = (result: Limiter.LimitResult): Limiter.View => result.view

/** The end a result names: a grant's or renewal's permit end, a pause's end. */
const untilOf = (result: Limiter.LimitResult): number | null =>
  result._tag === "Granted" || result._tag === "Renewed"
    ? result.permitUntil
    : result._tag === "Paused" || result._tag === "Wait"
      ? result.until
      : null

/** One item's event, with its result (or the failure of the call). */
const eventOf = (
  env: SimLimiterEnv,
  start: number,
  item: Limiter.LimitItem,
  result: Limiter.LimitResult | string,
  delivered = true
): LimitEvent => {
  const named = item._tag === "Pause" ? undefined : item
  return {
    k: "limit",
    t: env.clock.now,
    start,
    who: env.actor.id,
    op: item._tag,
    resource: item.resource,
    callId: named?.callId ?? null,
    jobId: named?.holder.jobId ?? null,
    token: named?.holder.token ?? null,
    leaseMs: item._tag === "Acquire" || item._tag === "Renew" ? item.leaseMs : null,
    reached: item._tag === "Release" ? item.reached : null,
    kind: item._tag === "Pause" ? item.kind : null,
    ok: typeof result !== "string",
    res: typeof result === "string" ? result : result._tag,
    until: typeof result === "string" ? (item._tag === "Pause" ? item.until : null) : untilOf(result),
    permits: typeof result === "string" ? null : viewOf(result).permits,
    delivered
  }
}

/**
 * The proxy for one participant.
 *
 * @since 0.4.0
 * @category constructors
 */
export const make = (limiter: Limiter.Limiter["Type"], env: SimLimiterEnv): Limiter.Limiter["Type"] => {
  const gated = passGate(env.actor)
  const { clock, faults, history } = env
  const decide = (point = "limiter.apply", kinds = limiterFaults): FaultKind | "Outage" | undefined => {
    if (!env.actor.faulted) return undefined
    if (faults.outage) return "Outage"
    return faults.roll(kinds, env.actor.id, point, env.actor.incarnation === null)
  }
  const send = (
    options: Parameters<Limiter.Limiter["Type"]["apply"]>[0],
    start: number,
    delivered = true
  ): Effect.Effect<Limiter.Reply<Limiter.LimitResult>> =>
    Effect.map(Effect.orDie(limiter.apply(options)), (reply) => {
      options.items.forEach((item, i) => {
        history.push(eventOf(env, start, item, reply.results[i]!, delivered))
      })
      return reply
    })
  const apply: Limiter.Limiter["Type"]["apply"] = (options) =>
    Effect.suspend(() => {
      const start = clock.now
      return gated(() => {
        const fault = decide()
        if (fault === "F5" || fault === "Outage") {
          for (const item of options.items) history.push(eventOf(env, start, item, "StoreError", false))
          return Effect.fail(refused)
        }
        const applied = (): Effect.Effect<Limiter.Reply<Limiter.LimitResult>, StoreError> =>
          fault === "F2"
            ? Effect.zipRight(send(options, start, false), send(options, start))
            : fault === "F6"
              ? Effect.zipRight(send(options, start, false), Effect.fail(lost))
              : send(options, start)
        const delayed =
          fault === "F7"
            ? Effect.flatMap(Random.nextIntBetween(100, 2_000), (ms) =>
                clock.sleepThen(
                  ms,
                  Effect.suspend(() => gated(applied))
                )
              )
            : applied()
        // The reply reaches a paused process when it runs again, a crashed one never.
        return Effect.flatMap(Effect.either(delayed), (either) =>
          gated(() => (either._tag === "Right" ? Effect.succeed(either.right) : Effect.fail(either.left)))
        )
      })
    })
  /** A read writes nothing and records nothing: it fails cleanly (F5, an outage) or is slow (F7). */
  const read: Limiter.Limiter["Type"]["read"] = (options) =>
    Effect.suspend(() =>
      gated(() => {
        const fault = decide("limiter.read", readFaults)
        if (fault === "F5" || fault === "Outage") return Effect.fail(readRefused)
        const reading =
          fault === "F7"
            ? Effect.flatMap(Random.nextIntBetween(100, 2_000), (ms) =>
                clock.sleepThen(
                  ms,
                  Effect.suspend(() => gated(() => limiter.read(options)))
                )
              )
            : limiter.read(options)
        // The reply reaches a paused process when it runs again, a crashed one never.
        return Effect.flatMap(Effect.either(reading), (either) =>
          gated(() => (either._tag === "Right" ? Effect.succeed(either.right) : Effect.fail(either.left)))
        )
      })
    )
  return {
    define: limiter.define,
    apply,
    resume: (options) =>
      Effect.map(limiter.resume(options), (reply) => {
        for (const [i, item] of options.items.entries()) {
          const result = reply.results[i]!
          history.push({
            k: "limit",
            t: clock.now,
            start: clock.now,
            who: env.actor.id,
            op: "Resume",
            resource: item.resource,
            callId: null,
            jobId: null,
            token: null,
            leaseMs: null,
            reached: null,
            kind: null,
            ok: true,
            res: result.wasPaused ? "Resumed" : "NotPaused",
            until: null,
            permits: result.view.permits,
            delivered: true
          })
        }
        return reply
      }),
    read
  }
}
