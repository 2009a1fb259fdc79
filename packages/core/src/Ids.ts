/**
 * Identifiers. Job ids are UUID version 7 (RFC 9562): 48 bits of milliseconds, then 74 random bits, so they sort
 * by creation time and cannot be guessed. Both halves come from Effect's `Clock` and `Random`, so a seeded
 * `Random` and a `TestClock` replay the same ids.
 *
 * @since 0.1.0
 */
import { Effect, Random } from "effect"
import { JobId } from "./Job.js"

const hex = (value: number, digits: number): string => value.toString(16).padStart(digits, "0")

const MAX_MILLIS = 2 ** 48 - 1

/**
 * A fresh job id: a UUID v7 whose time field is `Clock.currentTimeMillis` (clamped to 0..2^48-1) and whose
 * `rand_a` (12 bits) and `rand_b` (62 bits) come from `Random`. The version nibble is 7 and the variant bits are
 * `10`, so every id matches the `JobId` schema. Ids made at later clock times sort after earlier ones.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeJobId: Effect.Effect<JobId> = Effect.clockWith((clock) =>
  Effect.randomWith((random) =>
    // The services are read once and drawn from directly, two draws for the four fields: 26 bits for `rand_a` and
    // the top of `rand_b`, 48 for the rest (an id is made on every submit).
    Effect.flatMap(random.nextIntBetween(0, 2 ** 26), (high) =>
      Effect.map(random.nextIntBetween(0, 2 ** 48), (low) => {
        const randA = high >>> 14
        const randBHigh = high & 0x3fff
        const randBMiddle = Math.floor(low / 2 ** 24)
        const randBLow = low % 2 ** 24
        const millis = Math.min(MAX_MILLIS, Math.max(0, Math.floor(clock.unsafeCurrentTimeMillis())))
        const time = hex(millis, 12)
        const variant = hex(0x8000 | randBHigh, 4)
        // Built to the schema's pattern field by field (the masks above bound every field's width), so the schema
        // check `make` would run on each id is skipped: it cost more than making the id.
        return JobId.make(
          `${time.slice(0, 8)}-${time.slice(8, 12)}-7${hex(randA, 3)}-${variant}-${hex(randBMiddle, 6)}${hex(randBLow, 6)}`,
          { disableValidation: true }
        )
      })
    )
  )
)

/**
 * The creation time (epoch ms) that a UUID v7 job id carries in its first 48 bits.
 *
 * @since 0.1.0
 * @category combinators
 */
export const jobIdMillis = (id: JobId): number => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)

/**
 * A fresh opaque id `prefix_` followed by 20 lowercase hex digits (80 bits from `Random`), for model call ids,
 * receipts and worker names. Deterministic under a seeded `Random`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeId: (prefix: string) => Effect.Effect<string> = Effect.fnUntraced(function* (prefix: string) {
  let out = ""
  for (let i = 0; i < 4; i++) out += hex(yield* Random.nextIntBetween(0, 2 ** 20), 5)
  return `${prefix}_${out}`
})
