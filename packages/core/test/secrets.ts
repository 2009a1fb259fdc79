/**
 * Planted secrets for the redaction tests: one generator per secret format `Redact.ts` removes, each giving the
 * secret as it would appear in an error (`text`) and the part that must never be seen again (`body`), and a
 * generator of failures that carry one in the places real errors carry them (message, JSON body, headers, a URL).
 */
import fc from "fast-check"

/** A planted secret: how it appears, and what must not survive redaction. */
export interface Planted {
  readonly format: string
  readonly text: string
  readonly body: string
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
const b64url = `${alnum}-_`

const word = (alphabet: string, min: number, max: number) =>
  fc
    .array(fc.constantFrom(...alphabet.split("")), { minLength: min, maxLength: max })
    .map((chars) => chars.join(""))
    // A body that is only digits or only letters could occur in the surrounding text by chance; keep both kinds.
    .filter((s) => /[0-9]/.test(s) && /[A-Za-z]/.test(s))

const prefixed = (format: string, prefix: string, alphabet = alnum, min = 20, max = 40): fc.Arbitrary<Planted> =>
  word(alphabet, min, max).map((body) => ({ format, text: `${prefix}${body}`, body }))

/** Every format, one arbitrary each. */
export const planted: fc.Arbitrary<Planted> = fc.oneof(
  prefixed("openai", "sk-proj-"),
  prefixed("anthropic", "sk-ant-api03-", b64url),
  prefixed("stripe live", "sk_live_"),
  prefixed("stripe restricted", "rk_test_"),
  prefixed("stripe webhook", "whsec_"),
  prefixed("github", "ghp_", alnum, 36, 36),
  prefixed("github oauth", "gho_", alnum, 36, 36),
  prefixed("github fine-grained", "github_pat_", `${alnum}_`, 40, 60),
  prefixed("gitlab", "glpat-", b64url),
  word(alnum, 20, 30).map((body) => ({ format: "slack bot", text: `xoxb-1234567890-0987654321-${body}`, body })),
  prefixed("slack app", "xapp-1-", alnum),
  prefixed("hugging face", "hf_", alnum, 34, 34),
  prefixed("groq", "gsk_", alnum, 40, 52),
  prefixed("xai", "xai-", alnum, 40, 80),
  prefixed("replicate", "r8_", alnum, 30, 40),
  prefixed("perplexity", "pplx-", alnum, 40, 48),
  prefixed("npm", "npm_", alnum, 36, 36),
  prefixed("google api", "AIza", b64url, 35, 35),
  prefixed("google oauth", "ya29.", b64url, 40, 80),
  word(upper, 16, 16).map((body) => ({ format: "aws access key id", text: `AKIA${body}`, body })),
  fc
    .tuple(word(b64url, 16, 40), word(b64url, 16, 60), word(b64url, 20, 43))
    .map(([h, p, s]) => ({ format: "jwt", text: `eyJ${h}.eyJ${p}.${s}`, body: `${h}.eyJ${p}` })),
  word(alnum, 12, 24).map((body) => ({
    format: "postgres url",
    text: `postgres://app_user:${body}@db.internal:5432/prod`,
    body
  })),
  word(alnum, 12, 24).map((body) => ({ format: "redis url", text: `rediss://default:${body}@cache:6380`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "json api_key", text: `{"api_key": "${body}"}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "json password", text: `{"user":"bob","password":"${body}"}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "json apiKey", text: `{"apiKey":"${body}"}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "json client_secret", text: `"client_secret": "${body}"`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "json access_token", text: `{"access_token":"${body}"}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "escaped json token", text: `"{\\"token\\": \\"${body}\\"}"`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "kv secret", text: `secret=${body}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "yaml password", text: `password: ${body}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "bearer", text: `Authorization: Bearer ${body}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "basic", text: `authorization: Basic ${body}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "x-api-key header", text: `x-api-key: ${body}`, body })),
  word(alnum, 12, 32).map((body) => ({ format: "cookie", text: `cookie: session=${body}`, body })),
  word(alnum, 12, 32).map((body) => ({
    format: "query key",
    text: `https://api.example/v1/m?alt=sse&key=${body}`,
    body
  })),
  word(alnum, 40, 60).map((body) => ({
    format: "pem private key",
    text: `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----`,
    body
  }))
)

/** Ordinary text around a secret: words, punctuation and spaces, never touching the secret itself. */
export const surrounding: fc.Arbitrary<string> = fc.stringMatching(/^[A-Za-z0-9 .,:;()!?'"#%/-]{0,40}$/)

/** A secret in a line of text, separated from what is around it by spaces. */
export const inText: fc.Arbitrary<{ readonly planted: Planted; readonly text: string }> = fc
  .tuple(surrounding, planted, surrounding)
  .map(([before, secret, after]) => ({ planted: secret, text: `${before} ${secret.text} ${after}` }))

/** Where a failure carries its secret, as vendor SDKs and HTTP clients build their errors. */
export const failureCarrying = (secret: Planted): fc.Arbitrary<unknown> =>
  fc.constantFrom<unknown>(
    new Error(`request failed: ${secret.text}`),
    Object.assign(new Error("HTTP 401"), {
      status: 401,
      body: `{"error":{"message":"bad credentials ${secret.text}"}}`
    }),
    Object.assign(new Error("upstream refused"), { status: 400, headers: { "x-echo": secret.text } }),
    { status: 403, message: `forbidden for ${secret.text}`, error: { type: "permission_error", message: secret.text } },
    Object.assign(new Error(`connect ECONNREFUSED while using ${secret.text}`), { code: "ECONNREFUSED" }),
    `a thrown string with ${secret.text}`
  )
