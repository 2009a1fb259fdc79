import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { sha256Hex, sha256HexStreamed } from "../src/internal/sha256.js"

describe("sha256Hex", () => {
  it("is the lowercase hex sha-256 of the UTF-8 bytes, the same on both paths", () => {
    for (const text of ["", "abc", '{"a":"x","b":[1,2]}', "é ü ß", "😀 emoji", "x".repeat(5_000)]) {
      const expected = createHash("sha256").update(Buffer.from(text, "utf8")).digest("hex")
      expect(sha256Hex(text)).toBe(expected)
      expect(sha256HexStreamed(text)).toBe(expected)
    }
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })
})
