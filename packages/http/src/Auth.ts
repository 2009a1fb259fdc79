/**
 * Bearer tokens mapped to tenants, for `Server.Options.tokens` and `slowcall serve --tokens-file`. A deployment keeps
 * only the sha-256 of each token (a token list can be read without giving away a token), and a request's token is
 * compared against every entry in constant time, so neither the answer's timing nor an early exit tells how much of
 * a guess was right.
 *
 * The text form, one entry per line (a file) or per comma (an environment variable), blank lines and `#` comments
 * ignored:
 *
 * ```text
 * # tenant   token hash
 * acme       sha256:4f2c...e91a
 * beta       sha256:0d3b...77c0
 * ```
 *
 * A tenant is 1 to 200 printable characters without spaces; a tenant may have several tokens (rotation), a hash
 * may name one tenant only.
 *
 * @since 0.3.0
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { Effect, Either, Option } from "effect"

/**
 * One accepted token: the tenant it speaks for and the sha-256 digest of the token (32 bytes).
 *
 * @since 0.3.0
 * @category models
 */
export interface TokenEntry {
  readonly tenant: string
  readonly digest: Uint8Array
}

/**
 * The accepted tokens of a deployment.
 *
 * @since 0.3.0
 * @category models
 */
export type TokenTable = ReadonlyArray<TokenEntry>

const digestOf = (token: string): Buffer => createHash("sha256").update(token, "utf8").digest()

/**
 * The line form of a token's hash, `sha256:<64 hex digits>`: what a token file holds instead of the token.
 *
 * @since 0.3.0
 * @category constructors
 */
export const hashToken = (token: string): string => `sha256:${digestOf(token).toString("hex")}`

/**
 * A fresh random token: `sct_` and 43 URL-safe characters (256 bits from the operating system's generator). The
 * prefix lets redaction (`Redact.redact`) recognise it in evidence and logs.
 *
 * @since 0.3.0
 * @category constructors
 */
export const makeToken = (): string => `sct_${randomBytes(32).toString("base64url")}`

const TENANT = /^[!-~]{1,200}$/
const HASH = /^sha256:([0-9a-f]{64})$/

/**
 * Parses the text form (see the module header). Fails with a message naming the first bad entry: a line that is
 * not `<tenant> sha256:<hex>`, or a hash given twice.
 *
 * @since 0.3.0
 * @category constructors
 */
export const parseTokens = (text: string): Either.Either<TokenTable, string> => {
  const entries: Array<TokenEntry> = []
  const seen = new Map<string, string>()
  const parts = text.split(/\r?\n|,/)
  for (let i = 0; i < parts.length; i++) {
    const line = parts[i]!.trim()
    if (line === "" || line.startsWith("#")) continue
    const fields = line.split(/\s+|=/).filter((field) => field !== "")
    const [tenant, hash] = fields
    const match = hash === undefined ? null : HASH.exec(hash.toLowerCase())
    if (fields.length !== 2 || tenant === undefined || !TENANT.test(tenant) || match === null) {
      return Either.left(`entry ${i + 1}: expected "<tenant> sha256:<64 hex digits>"`)
    }
    const hex = match[1]!
    const other = seen.get(hex)
    if (other !== undefined) return Either.left(`entry ${i + 1}: this hash is already given for tenant ${other}`)
    seen.set(hex, tenant)
    entries.push({ tenant, digest: Buffer.from(hex, "hex") })
  }
  return Either.right(entries)
}

/**
 * The tenant a bearer token speaks for. Every entry is compared, each in constant time, whatever matched; a header
 * that is not `Bearer <token>` never matches.
 *
 * @since 0.3.0
 * @category combinators
 */
export const tenantOf = (table: TokenTable, authorization: string | undefined): Option.Option<string> => {
  const match = authorization === undefined ? null : /^Bearer ([!-~]{1,4096})$/.exec(authorization.trim())
  // A missing or malformed header is still compared, against a digest no token has, so it takes as long as a guess.
  const presented = match === null ? Buffer.alloc(32) : digestOf(match[1]!)
  let found: string | undefined
  for (const entry of table) {
    if (timingSafeEqual(presented, entry.digest) && match !== null) found = entry.tenant
  }
  return Option.fromNullable(found)
}

/**
 * An `authenticate` resolver for `Server.Options` over a token table.
 *
 * @since 0.3.0
 * @category constructors
 */
export const authenticator =
  (table: TokenTable) =>
  (authorization: string | undefined): Effect.Effect<Option.Option<string>> =>
    Effect.sync(() => tenantOf(table, authorization))
