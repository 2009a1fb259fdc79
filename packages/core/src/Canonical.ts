/**
 * Canonical JSON: one string per JSON value, whatever the key order of its objects. The input hash of a job is the
 * sha-256 of this string, so two submits of the same value under one idempotency key always agree, and anything
 * that is not plain JSON is rejected before it can reach a Store.
 *
 * @since 0.1.0
 */
import { type Effect, Either } from "effect"
import { InvalidInput } from "./Errors.js"
import { sha256Hex } from "./internal/sha256.js"
import type { Json } from "./Job.js"

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const describe = (value: unknown): string => {
  if (value === undefined) return "undefined"
  if (typeof value === "number") return String(value)
  if (typeof value === "function") return "a function"
  if (typeof value === "symbol") return "a symbol"
  if (typeof value === "bigint") return "a BigInt"
  const name = (value as object).constructor?.name
  return name ? `an instance of ${name}` : "a non-plain object"
}

const propertyPath = (path: string, key: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`

class Rejection {
  constructor(
    readonly path: string | null,
    readonly message: string
  ) {}
}

// U+0000 is valid JSON but no store can keep it everywhere (Postgres text and jsonb reject it), so it is refused
// here, where every store sees the same rule. So is a lone surrogate (half of a UTF-16 pair, as `"\ud800"` in JSON
// text gives): it has no UTF-8 form, and Postgres refuses it in jsonb.
const NUL = "\u0000"
const nulMessage = "U+0000 cannot be stored"
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const surrogateMessage = "a lone UTF-16 surrogate cannot be stored"

/**
 * The deepest nesting of arrays and objects a value may have: the top level is depth 0, so `[[1]]` is depth 2.
 * Checked before each recursive step, so no walk of a value can overflow the stack however deep the value is.
 *
 * @since 0.3.0
 * @category models
 */
export const maxDepth = 64

const depthMessage = `nesting deeper than ${maxDepth} levels`

/**
 * Why a string cannot be stored by every Store, or undefined: U+0000 anywhere, or a lone UTF-16 surrogate. The one
 * rule for input strings and keys, and for every other string a submit carries (queue, type, request key, input
 * reference, tenant, trace id).
 *
 * @since 0.3.0
 * @category combinators
 */
export const unstorable = (text: string): string | undefined =>
  text.includes(NUL) ? `contains ${nulMessage}` : loneSurrogate.test(text) ? `contains ${surrogateMessage}` : undefined

/**
 * Encodes `value`, or throws a `Rejection`. `path` names where `value` sits; null builds no paths at all (most values
 * are valid, and naming every element and key costs more than encoding it): the rejection then has no path, and the
 * caller encodes again with paths to find it.
 */
const encode = (value: unknown, path: string | null, ancestors: Set<object>): string => {
  switch (typeof value) {
    case "string": {
      const problem = unstorable(value)
      if (problem !== undefined) throw new Rejection(path, `the string ${problem}`)
      return JSON.stringify(value)
    }
    case "boolean":
      return value ? "true" : "false"
    case "number":
      if (!Number.isFinite(value)) throw new Rejection(path, `${describe(value)} is not a JSON number`)
      // JSON.stringify(-0) is "0" already; the explicit check keeps the rule visible.
      return Object.is(value, -0) ? "0" : JSON.stringify(value)
    case "object": {
      if (value === null) return "null"
      if (ancestors.has(value)) throw new Rejection(path, "the value contains a cycle")
      // `ancestors` holds exactly the objects above this one: its size is this value's depth.
      if (ancestors.size >= maxDepth) throw new Rejection(path, depthMessage)
      if (Array.isArray(value)) {
        ancestors.add(value)
        const parts: Array<string> = []
        for (let i = 0; i < value.length; i++) {
          // Holes in sparse arrays read as undefined and are rejected like undefined.
          parts.push(encode(value[i], path === null ? null : `${path}[${i}]`, ancestors))
        }
        ancestors.delete(value)
        return `[${parts.join(",")}]`
      }
      if (!isPlainObject(value)) throw new Rejection(path, `${describe(value)} is not plain JSON`)
      if (Object.getOwnPropertySymbols(value).length > 0) {
        throw new Rejection(path, "symbol keys are not plain JSON")
      }
      ancestors.add(value)
      const record = value as Record<string, unknown>
      const keys = Object.keys(record).sort()
      const parts: Array<string> = []
      for (const key of keys) {
        const at = path === null ? null : propertyPath(path, key)
        const problem = unstorable(key)
        if (problem !== undefined) throw new Rejection(at, `the key ${problem}`)
        parts.push(`${JSON.stringify(key)}:${encode(record[key], at, ancestors)}`)
      }
      ancestors.delete(value)
      return `{${parts.join(",")}}`
    }
    default:
      throw new Rejection(path, `${describe(value)} is not plain JSON`)
  }
}

/**
 * The canonical JSON text of a value: object keys sorted recursively (by UTF-16 code units), no whitespace, `-0`
 * written as `0`. Two values that are equal as JSON give the same text. Anything that is not plain JSON (undefined
 * anywhere, NaN, infinities, functions, symbols, BigInt, cycles, objects whose prototype is neither
 * `Object.prototype` nor null) is rejected with an `InvalidInput` naming its path (`$.a[2].b`). So is a string or
 * object key containing U+0000 or a lone UTF-16 surrogate (`unstorable`): JSON allows them, but not every Store can
 * keep them, and a value one Store accepts must be accepted by all. So is a value nested deeper than `maxDepth`,
 * checked before each step down, so the walk itself never overflows the stack.
 *
 * @since 0.1.0
 * @category constructors
 */
export const canonicalJson = (value: unknown): Either.Either<string, InvalidInput> => {
  try {
    return Either.right(encode(value, null, new Set()))
  } catch (error) {
    if (!(error instanceof Rejection)) throw error
  }
  // Refused: encoded again, naming paths this time, to say where (the same walk meets the same first rejection).
  try {
    encode(value, "$", new Set())
  } catch (error) {
    if (error instanceof Rejection) {
      return Either.left(new InvalidInput({ path: error.path ?? "$", message: error.message }))
    }
    throw error
  }
  return Either.left(new InvalidInput({ path: "$", message: "the value is not plain JSON" }))
}

/**
 * The value itself, typed as `Json`, when it is plain JSON as `canonicalJson` defines it; otherwise the same
 * `InvalidInput`. The value is not copied.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validateJson = (value: unknown): Either.Either<Json, InvalidInput> =>
  isPlainJson(value, []) ? Either.right(value as Json) : Either.map(canonicalJson(value), () => value as Json)

/**
 * Whether `encode` would accept `value`, decided by the same rules without building any text (a check of a result or
 * an input needs no text). When this says no, `canonicalJson` names the first rejection; it is never more lenient
 * than `encode`.
 */
const isPlainJson = (value: unknown, ancestors: Array<object>): boolean => {
  switch (typeof value) {
    case "string":
      return unstorable(value) === undefined
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value)
    case "object": {
      if (value === null) return true
      if (ancestors.length >= maxDepth || ancestors.includes(value)) return false
      if (Array.isArray(value)) {
        ancestors.push(value)
        for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], ancestors)) return false
        ancestors.pop()
        return true
      }
      if (!isPlainObject(value) || Object.getOwnPropertySymbols(value).length > 0) return false
      ancestors.push(value)
      const record = value as Record<string, unknown>
      for (const key of Object.keys(record)) {
        if (unstorable(key) !== undefined || !isPlainJson(record[key], ancestors)) return false
      }
      ancestors.pop()
      return true
    }
    default:
      return false
  }
}

/**
 * Lowercase hex sha-256 of the canonical JSON text: equal JSON values hash equally, so a reused idempotency key
 * with other input is detected whatever the key order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const inputHash = (value: unknown): Effect.Effect<string, InvalidInput> => inputHashEither(value)

/**
 * `inputHash` as a plain `Either`, for callers that hash outside an effect: the same hash, or the same
 * `InvalidInput` naming the first rejection. One walk of the value both checks it and writes its canonical text, so a
 * caller needs no separate `validateJson` first.
 *
 * @since 0.4.0
 * @category constructors
 */
export const inputHashEither = (value: unknown): Either.Either<string, InvalidInput> =>
  Either.map(canonicalJson(value), sha256Hex)
