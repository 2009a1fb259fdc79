/**
 * `serve --retention`: the duration it reads, and the loop that purges the queue's finished jobs once they are that
 * old (created before the store's now minus the retention), a chunk at a time.
 *
 * @internal
 */
import * as Store from "@slowcall/core/Store"
import { Effect, Layer } from "effect"
import { Purge } from "../Backend.js"

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/**
 * A retention as milliseconds: a positive number with a unit (`500ms`, `90s`, `5m`, `12h`, `7d`, `2w`), or `off`
 * (undefined). Anything else is a message saying what is accepted.
 *
 * @internal
 */
export const parse = (text: string): { readonly ms: number | undefined } | { readonly problem: string } => {
  const trimmed = text.trim().toLowerCase()
  if (trimmed === "off") return { ms: undefined }
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/.exec(trimmed)
  const ms = match === null ? Number.NaN : Number(match[1]) * units[match[2]!]!
  return Number.isFinite(ms) && ms >= 1_000
    ? { ms }
    : { problem: `${JSON.stringify(text)}: a duration of at least 1s such as 90s, 30m, 12h, 7d or 2w, or off` }
}

/**
 * How often the purge runs for a retention: a tenth of it, between 1 s and 1 min, so a finished job lives at most
 * about 10% (or a minute) past its retention.
 *
 * @internal
 */
export const intervalFor = (retentionMs: number): number => Math.min(60_000, Math.max(1_000, retentionMs / 10))

/** The most jobs one statement or script deletes: a short write, never a long lock. */
const CHUNK = 1_000
/** The most chunks one pass deletes; a backlog beyond it is left for the next pass. */
const MAX_CHUNKS = 100

/**
 * The purge loop: at start and then every `intervalFor(retentionMs)`, the `queue`'s finished jobs (succeeded,
 * failed, abandoned) created before store time minus `retentionMs` are deleted, `CHUNK` at a time, until a chunk
 * comes back short. Each chunk is one info line (`purged N finished jobs ...`); a failed pass is a warning and the
 * next one tries again. Every process may run it: the stores' purges skip rows another one is deleting. On a store
 * without a purge (in memory) it logs that once and does nothing.
 *
 * @internal
 */
export const layer = (options: {
  readonly queue: string
  readonly retentionMs: number
}): Layer.Layer<never, never, Store.Store | Purge> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const { purge } = yield* Purge
      if (purge === undefined) {
        return yield* Effect.logInfo("retention: the in-memory store keeps nothing past the process; nothing to purge")
      }
      const store = yield* Store.Store
      const pass = Effect.gen(function* () {
        const createdBefore = (yield* store.now) - options.retentionMs
        for (let chunk = 0; chunk < MAX_CHUNKS; chunk++) {
          const ids = yield* purge({ queue: options.queue, createdBefore, limit: CHUNK })
          if (ids.length > 0) {
            yield* Effect.logInfo(
              `retention: purged ${ids.length} finished jobs created before ${new Date(createdBefore).toISOString()}`
            ).pipe(Effect.annotateLogs({ queue: options.queue, purged: ids.length }))
          }
          if (ids.length < CHUNK) return
        }
      })
      yield* pass.pipe(
        Effect.catchAll((error) => Effect.logWarning("retention: purge failed; the next pass tries again", error)),
        Effect.zipRight(Effect.sleep(intervalFor(options.retentionMs))),
        Effect.forever,
        Effect.forkScoped
      )
    })
  )
