/**
 * Redaction: each secret format of the issue by example, then properties over planted secrets (none survives, the
 * result is idempotent, ordinary provider errors stay as they were), and the whole path: a handler failure and a
 * store failure carrying secrets, run through the real Worker, leave none in the job record, the attempt evidence or
 * a log line.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger, Schema, TestContext } from "effect"
import fc from "fast-check"
import { StoreError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import { normalize } from "../src/Normalize.js"
import * as Redact from "../src/Redact.js"
import { harness } from "./fixtures.js"
import { failureCarrying, inText, planted } from "./secrets.js"

describe("Redact.redact", () => {
  const rows: ReadonlyArray<readonly [string, string, string]> = [
    ["JSON api_key", '{"model":"m","api_key":"abc123secretvalue"}', "abc123secretvalue"],
    ["JSON password", '{"user":"bob","password": "hunter2hunter2"}', "hunter2hunter2"],
    [
      "GitHub token",
      "clone with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed",
      "16C7e42F292c6912E7710c838347Ae178B4a"
    ],
    [
      "Slack bot token",
      "slack said invalid_auth for xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
      "pdFZKVeTuE8sk7oOcBrzbqgy"
    ],
    ["Hugging Face token", "401 for hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "abcdefghijklmnopqrstuvwxyzABCDEFGH"],
    ["Groq key", "gsk_0123456789abcdefghijABCDEFGHIJ0123456789abcdefgh", "0123456789abcdefghijABCDEFGHIJ"],
    ["Stripe live key", "Stripe: No such customer; key sk_live_51HbCdEfGhIjKlMnOp used", "51HbCdEfGhIjKlMnOp"],
    ["Postgres URL", "connect failed: postgres://app:s3cr3tPass@db.internal:5432/prod", "s3cr3tPass"],
    [
      "bare JWT",
      "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c rejected",
      "eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ],
    ["access_token field", "refresh failed: access_token=ya29.a0AfH6SMBexample&x=1", "a0AfH6SMBexample"],
    ["Authorization header", "Authorization: Bearer abcdef0123456789", "abcdef0123456789"],
    ["escaped JSON in JSON", '{"detail":"{\\"secret\\":\\"topsecretvalue\\"}"}', "topsecretvalue"],
    [
      "escaped JSON value holding an escaped quote",
      JSON.stringify(JSON.stringify({ token: 'abc"tailofthesecret' })),
      "tailofthesecret"
    ],
    [
      "SDK message: a body stringified twice (a log line holding the error)",
      JSON.stringify({
        msg: JSON.stringify({ error: { type: "authentication_error", api_key: "p4ss w0rd, still}secret" } })
      }),
      "still}secret"
    ],
    [
      "private key",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z\n-----END RSA PRIVATE KEY-----",
      "MIIEowIBAAKCAQEA0Z"
    ],
    ["slowcall API token", "unauthorized: sct_0a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ012345", "0a1B2c3D4e5F6g7H8i9J0k"],
    ["a key cut off by truncation", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBYpartial", "MHcCAQEEIBYpartial"]
  ]
  it.each(rows)("removes a %s", (_label, input, secret) => {
    const out = Redact.redact(input)
    expect(out).not.toContain(secret)
    expect(out).toContain(Redact.marker)
    expect(Redact.redact(out)).toBe(out)
  })

  it("keeps the shape around a secret: names, prefixes and user names stay", () => {
    expect(Redact.redact('{"api_key":"abc123secretvalue","n":1}')).toBe('{"api_key":"[redacted]","n":1}')
    expect(Redact.redact("postgres://app:pw@db/x")).toBe("postgres://app:[redacted]@db/x")
    expect(Redact.redact("ghp_16C7e42F292c6912E7710c838347Ae178B4a")).toBe("ghp_[redacted]")
    expect(Redact.redact('{"token": null, "secret": ""}')).toBe('{"token": null, "secret": ""}')
  })

  it("leaves ordinary provider errors as they are", () => {
    const ordinary = [
      "HTTP 429: Rate limit reached for gpt-4o in organization org-123 on tokens per min (TPM): Limit 30000",
      '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
      '{"error":{"code":400,"message":"max_tokens: 100000 > 8192, the maximum allowed","status":"INVALID_ARGUMENT"}}',
      '{"error":{"message":"This model\'s maximum context length is 128000 tokens","code":"context_length_exceeded"}}',
      "lease lost on job 0190c7a4-0000-7000-8000-000000000001: token 3, current 4, state running",
      "connect ECONNREFUSED 127.0.0.1:5432",
      '{"author":"me","keyboard":"qwerty","monkey_count":2}'
    ]
    for (const text of ordinary) expect(Redact.redact(text)).toBe(text)
  })

  it("property: no planted secret survives, wherever it sits in a line, and redacting again changes nothing", () => {
    fc.assert(
      fc.property(inText, ({ planted: secret, text }) => {
        const out = Redact.redact(text)
        expect(out, secret.format).not.toContain(secret.body)
        expect(Redact.redact(out)).toBe(out)
      }),
      { numRuns: 3_000 }
    )
  })

  it("property: redaction is idempotent on any text", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: "binary", maxLength: 100 })), (text) => {
        const once = Redact.redact(text)
        expect(Redact.redact(once)).toBe(once)
      }),
      { numRuns: 3_000 }
    )
  })

  it("property: normalised evidence of a failure carrying a secret never holds it", () => {
    fc.assert(
      fc.property(
        planted.chain((secret) => failureCarrying(secret).map((failure) => ({ secret, failure }))),
        ({ failure, secret }) => {
          expect(normalize(failure).evidence, secret.format).not.toContain(secret.body)
        }
      ),
      { numRuns: 1_000 }
    )
  })

  it.effect("the redacting logger writes no secret of a logged error, cause or annotation", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const log = Effect.logWarning("store failed", new Error("auth for postgres://u:pw123456@h/db")).pipe(
        Effect.annotateLogs({ request: '{"api_key":"annotatedsecret1"}' }),
        Effect.zipRight(Effect.logError("boom", new Error("ghp_16C7e42F292c6912E7710c838347Ae178B4a")))
      )
      yield* log.pipe(
        Effect.provide(
          Logger.replace(
            Logger.defaultLogger,
            Redact.loggerTo((line) => lines.push(line))
          )
        )
      )

      expect(lines).toHaveLength(2)
      const all = lines.join("\n")
      expect(all).toContain("store failed")
      for (const secret of ["pw123456", "annotatedsecret1", "16C7e42F292c6912E7710c838347Ae178B4a"]) {
        expect(all).not.toContain(secret)
      }
    })
  )
})

describe("Redact.redactJson", () => {
  it("keeps JSON: strings and keys are redacted, a secret field's value goes whatever it holds", () => {
    const input = {
      prompt: "summarise this",
      apiKey: 12345,
      headers: { authorization: "Bearer abcdef0123456789", "x-request-id": "r-1" },
      credentials: { user: "bob", pass: "hunter2hunter2" },
      token: null,
      secret: "",
      refresh_token: true,
      max_tokens: 256,
      notes: ["see postgres://app:s3cr3tPass@db/x", 1.5, false],
      "sk-proj-0123456789abcdefghijABCDEFGHIJ": "a secret used as a key"
    }

    const out = Redact.redactJson(input)

    expect(out).toEqual({
      prompt: "summarise this",
      apiKey: "[redacted]",
      headers: { authorization: "[redacted]", "x-request-id": "r-1" },
      credentials: "[redacted]",
      token: null,
      secret: "",
      refresh_token: true,
      max_tokens: 256,
      notes: ["see postgres://app:[redacted]@db/x", 1.5, false],
      "sk-[redacted]": "a secret used as a key"
    })
    expect(Redact.redactJson(out)).toEqual(out)
    expect(Redact.redact(JSON.stringify(out))).toBe(JSON.stringify(out))
  })

  it("leaves scalars and ordinary inputs alone, and a __proto__ key stays a plain field", () => {
    expect(Redact.redactJson(null)).toBeNull()
    expect(Redact.redactJson(42)).toBe(42)
    expect(Redact.redactJson({ text: "hello", n: [1, 2] })).toEqual({ text: "hello", n: [1, 2] })
    const parsed = JSON.parse('{"__proto__": {"polluted": 1}, "a": 1}')
    const out = Redact.redactJson(parsed) as Record<string, unknown>
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype)
    expect(JSON.stringify(out)).toBe('{"__proto__":{"polluted":1},"a":1}')
  })

  it("property: no planted secret survives in a JSON value, wherever it sits, and its text redacts to itself", () => {
    const placed = planted.chain((secret) =>
      fc
        .constantFrom<(text: string) => unknown>(
          (text) => ({ input: text }),
          (text) => ({ nested: { list: ["a", `prefix ${text} suffix`] } }),
          (text) => [{ note: text }],
          (text) => ({ [text]: 1 }),
          (text) => ({ error: JSON.parse(JSON.stringify({ message: text })) })
        )
        .map((place) => ({ secret, value: place(secret.text) }))
    )
    fc.assert(
      fc.property(placed, ({ secret, value }) => {
        const text = JSON.stringify(Redact.redactJson(value as never))
        expect(text, secret.format).not.toContain(secret.body)
        expect(Redact.redact(text)).toBe(text)
      }),
      { numRuns: 2_000 }
    )
  })
})

describe("secrets planted in failures, through the Worker", () => {
  const Input = Schema.Struct({ n: Schema.Number })

  /** One run: a claim that fails once with a store error naming the secret, then a handler failing with it. */
  const run = (secret: { readonly body: string; readonly text: string }, failure: unknown) =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      let claimFailures = 1
      const t = yield* harness({
        wrap: (store) => ({
          ...store,
          claim: (options) =>
            claimFailures-- > 0
              ? Effect.fail(new StoreError({ reason: "Unknown", operation: "claim", detail: `dial ${secret.text}` }))
              : store.claim(options)
        })
      })
      const id = yield* t.submit({ type: "leaky", input: { n: 1 }, maxAttempts: 1 })
      const handler = Handler.make({
        type: "leaky",
        version: 1,
        input: Input,
        result: Schema.Null,
        estimateCents: 1,
        attempt: { timeoutMs: 1_000 },
        run: (_input, ctx) =>
          ctx.call({ estimateCents: 1, cost: () => 1, run: Effect.fail(failure), costOnError: () => 1 })
      })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] }).pipe(
        Effect.provide(
          Logger.replace(
            Logger.defaultLogger,
            Redact.loggerTo((line) => lines.push(line))
          )
        )
      )
      const job = yield* t.reaches(id, ["failed"])
      const attempts = yield* t.query.attempts({ jobId: id })
      return { job, attempts, lines }
    })

  it("property: none reaches the job record, the attempt evidence or a log line", async () => {
    await fc.assert(
      fc.asyncProperty(
        planted.chain((secret) => failureCarrying(secret).map((failure) => ({ secret, failure }))),
        async ({ failure, secret }) => {
          const exit = await Effect.runPromiseExit(
            Effect.scoped(run(secret, failure)).pipe(Effect.provide(TestContext.TestContext))
          )
          if (!Exit.isSuccess(exit)) throw new Error(`the run failed: ${String(exit.cause)}`)
          const { attempts, job, lines } = exit.value
          expect(job.state).toBe("failed")
          expect(lines.some((line) => line.includes("claim failed"))).toBe(true)
          const seen = [job.lastError ?? "", ...attempts.map((a) => a.evidence ?? ""), ...lines].join("\n")
          expect(seen, secret.format).not.toContain(secret.body)
        }
      ),
      { numRuns: 60 }
    )
  })
})
