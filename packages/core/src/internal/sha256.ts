/**
 * The lowercase hex sha-256 of a string's UTF-8 bytes, the one digest behind input hashes and request fingerprints.
 * Node's one-shot `crypto.hash` (Node 20.12 and later) gives the same digest as a `createHash` object at a third of
 * its cost for short texts; older Node 20 releases, which lack it, use `createHash`.
 *
 * @internal
 */
import * as crypto from "node:crypto"

/** `crypto.hash` where this Node has it. */
const oneShot: ((algorithm: string, data: string, encoding: "hex") => string) | undefined =
  typeof crypto.hash === "function" ? crypto.hash : undefined

/**
 * The digest with `createHash`, on every Node release.
 *
 * @internal
 */
export const sha256HexStreamed = (text: string): string =>
  crypto.createHash("sha256").update(text, "utf8").digest("hex")

/**
 * The digest, with `crypto.hash` when available; always equal to `sha256HexStreamed(text)`.
 *
 * @internal
 */
export const sha256Hex: (text: string) => string =
  oneShot === undefined ? sha256HexStreamed : (text) => oneShot("sha256", text, "hex")
