import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import fc from "fast-check"
import { canonicalJson, inputHash, inputHashEither, maxDepth, unstorable, validateJson } from "../src/Canonical.js"

const rejection = (value: unknown) => {
  const result = canonicalJson(value)
  if (Either.isRight(result)) throw new Error(`expected a rejection, got ${result.right}`)
  return result.left
}

class Point {
  constructor(readonly x: number) {}
}

describe("canonicalJson", () => {
  it("sorts keys recursively and writes no whitespace", () => {
    const text = Either.getOrThrow(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: "x" } }))
    expect(text).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}')
  })

  it("writes -0 as 0 and keeps scalars as JSON does", () => {
    expect(Either.getOrThrow(canonicalJson([-0, 0, 1.5, -2, 1e21, "é\n", true, false, null]))).toBe(
      '[0,0,1.5,-2,1e+21,"é\\n",true,false,null]'
    )
  })

  it("accepts objects with a null prototype", () => {
    const bare = Object.create(null) as Record<string, unknown>
    bare.b = 2
    bare.a = 1
    expect(Either.getOrThrow(canonicalJson({ bare }))).toBe('{"bare":{"a":1,"b":2}}')
  })

  it("accepts a value shared twice that is not a cycle", () => {
    const shared = { k: 1 }
    expect(Either.getOrThrow(canonicalJson({ a: shared, b: [shared] }))).toBe('{"a":{"k":1},"b":[{"k":1}]}')
  })

  it.each([
    ["undefined at the top", undefined, "$"],
    ["undefined as an object value", { a: { b: undefined } }, "$.a.b"],
    ["undefined as an array element", { a: [1, 2, undefined] }, "$.a[2]"],
    ["a hole in a sparse array", new Array<number>(3).fill(1, 0, 1), "$[1]"],
    ["NaN", { a: [{ b: Number.NaN }] }, "$.a[0].b"],
    ["Infinity", [Number.POSITIVE_INFINITY], "$[0]"],
    ["-Infinity", { x: Number.NEGATIVE_INFINITY }, "$.x"],
    ["a function", { f: () => 1 }, "$.f"],
    ["a symbol", { s: Symbol("s") }, "$.s"],
    ["a BigInt", { n: 10n }, "$.n"],
    ["a Date", { at: new Date(0) }, "$.at"],
    ["a Map", { m: new Map() }, "$.m"],
    ["a Set", [new Set([1])], "$[0]"],
    ["a class instance", { p: new Point(1) }, "$.p"],
    ["a key that is not an identifier", { "a b": { c: undefined } }, '$["a b"].c']
  ])("rejects %s with its path", (_name, value, path) => {
    const error = rejection(value)
    expect(error._tag).toBe("InvalidInput")
    expect(error.path).toBe(path)
    expect(error.message.length).toBeGreaterThan(0)
  })

  it("rejects cycles", () => {
    const a: Record<string, unknown> = { x: 1 }
    a.self = { back: a }
    const error = rejection(a)
    expect(error.path).toBe("$.self.back")
    expect(error.message).toContain("cycle")
    const list: Array<unknown> = []
    list.push(list)
    expect(rejection(list).path).toBe("$[0]")
  })

  it("rejects U+0000 in strings and in keys, at any depth, naming the path", () => {
    const inString = rejection({ a: [1, "ok", "nul \u0000 inside"] })
    expect(inString.path).toBe("$.a[2]")
    expect(inString.message).toContain("U+0000 cannot be stored")
    const inKey = rejection({ outer: { "k\u0000": 1 } })
    expect(inKey.path).toBe('$.outer["k\\u0000"]')
    expect(inKey.message).toContain("U+0000 cannot be stored")
    // Other control characters are stored fine and escaped as JSON does.
    expect(Either.getOrThrow(canonicalJson(["\u0001\u001f"]))).toBe('["\\u0001\\u001f"]')
  })

  it("rejects a lone UTF-16 surrogate in strings and keys; a whole pair is kept", () => {
    expect(rejection({ a: "x\ud800" }).message).toContain("lone UTF-16 surrogate")
    expect(rejection(["ok", "\udc00y"]).path).toBe("$[1]")
    expect(rejection({ "k\udbff": 1 }).message).toContain("the key contains a lone UTF-16 surrogate")
    // A lone surrogate from JSON text, as a request body would carry it.
    expect(rejection(JSON.parse('{"t":"\\ud83d"}')).path).toBe("$.t")
    expect(Either.getOrThrow(canonicalJson({ emoji: "\ud83d\ude00" }))).toBe('{"emoji":"\ud83d\ude00"}')
    expect(Either.isRight(validateJson("\ud83d\ude00"))).toBe(true)
    expect(Either.isLeft(validateJson("\ud83d"))).toBe(true)
  })

  it("rejects nesting deeper than maxDepth before walking further, however deep the value", () => {
    const nest = (depth: number): unknown => {
      let value: unknown = 1
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value }
      return value
    }
    expect(Either.isRight(canonicalJson(nest(maxDepth)))).toBe(true)
    expect(Either.isRight(validateJson(nest(maxDepth)))).toBe(true)
    for (const depth of [maxDepth + 1, 5_000, 200_000]) {
      const error = rejection(nest(depth))
      expect(error.message).toBe(`nesting deeper than ${maxDepth} levels`)
      expect(Either.isLeft(validateJson(nest(depth)))).toBe(true)
      expect(Effect.runSync(Effect.either(inputHash(nest(depth))))._tag).toBe("Left")
    }
  })

  it("unstorable names U+0000 and lone surrogates, and nothing else", () => {
    expect(unstorable("plain é 😀")).toBeUndefined()
    expect(unstorable("a\u0000")).toContain("U+0000")
    expect(unstorable("\udfff")).toContain("surrogate")
  })

  it("rejects symbol keys", () => {
    expect(rejection({ [Symbol("k")]: 1 }).path).toBe("$")
  })

  it("is independent of key order and agrees with JSON.parse for any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = Either.getOrThrow(canonicalJson(value))
        const reversed = JSON.parse(JSON.stringify(value), (_key, v) =>
          v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v
        )
        expect(Either.getOrThrow(canonicalJson(reversed))).toBe(text)
        // Round trip: the canonical text parses to a value whose canonical text is the same.
        expect(Either.getOrThrow(canonicalJson(JSON.parse(text)))).toBe(text)
      })
    )
  })
})

describe("validateJson", () => {
  it("returns the same value for plain JSON and rejects the rest", () => {
    const value = { a: [1, "x", null] }
    expect(Either.getOrThrow(validateJson(value))).toBe(value)
    expect(Either.isLeft(validateJson({ a: new Date(0) }))).toBe(true)
  })
})

describe("inputHash", () => {
  it.effect("is the lowercase hex sha-256 of the canonical text, whatever the key order", () =>
    Effect.gen(function* () {
      const a = yield* inputHash({ b: [1, 2], a: "x" })
      const b = yield* inputHash({ a: "x", b: [1, 2] })
      expect(a).toBe(b)
      expect(a).toMatch(/^[0-9a-f]{64}$/)
      expect(a).toBe(createHash("sha256").update('{"a":"x","b":[1,2]}').digest("hex"))
      expect(yield* inputHash({ a: "x", b: [2, 1] })).not.toBe(a)
    })
  )

  it.effect("fails with InvalidInput for values that are not plain JSON", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(inputHash({ when: new Date(0) }))
      expect(error).toMatchObject({ _tag: "InvalidInput", path: "$.when" })
    })
  )
})

describe("inputHashEither", () => {
  it.effect("gives the hash inputHash gives, and the same InvalidInput for a rejected value", () =>
    Effect.gen(function* () {
      const value = { b: [1, { d: -0, c: "y" }], a: "x" }
      expect(Either.getOrThrow(inputHashEither(value))).toBe(yield* inputHash(value))
      expect(Either.getOrThrow(inputHashEither(value))).toBe(
        createHash("sha256").update('{"a":"x","b":[1,{"c":"y","d":0}]}').digest("hex")
      )
      const rejected = inputHashEither({ a: [1, Number.NaN] })
      expect(Either.isLeft(rejected)).toBe(true)
      if (Either.isLeft(rejected)) {
        expect(rejected.left).toMatchObject({ _tag: "InvalidInput", path: "$.a[1]" })
        expect(rejected.left).toEqual(yield* Effect.flip(inputHash({ a: [1, Number.NaN] })))
      }
    })
  )
})
