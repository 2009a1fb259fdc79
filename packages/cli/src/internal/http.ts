/**
 * A small JSON-over-HTTP helper for the commands that talk to a running server. Every failure becomes a
 * `CliError` whose message is one line a person can act on.
 *
 * @internal
 */
import { Effect } from "effect"
import { CliError } from "../CliError.js"

/** @internal */
export const request = <A = any>(
  base: string,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: unknown
): Effect.Effect<A, CliError> =>
  Effect.gen(function* () {
    const url = new URL(path, base.endsWith("/") ? base : `${base}/`)
    const response = yield* Effect.tryPromise({
      try: (signal) =>
        fetch(url, {
          method,
          signal,
          headers: {
            accept: "application/json",
            ...(body === undefined ? {} : { "content-type": "application/json" }),
            ...(process.env.SLOWCALL_TOKEN ? { authorization: `Bearer ${process.env.SLOWCALL_TOKEN}` } : {})
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        }),
      catch: () =>
        new CliError({ message: `cannot reach the slowcall server at ${url.origin} (is \`slowcall serve\` running?)` })
    })
    const text = yield* Effect.tryPromise({
      try: () => response.text(),
      catch: () => new CliError({ message: `the server at ${url.origin} closed the connection` })
    })
    let json: any
    try {
      json = text === "" ? null : JSON.parse(text)
    } catch {
      return yield* new CliError({ message: `the server at ${url.origin} answered ${response.status} with non-JSON` })
    }
    if (!response.ok) {
      const code = json?.error ?? `HTTP ${response.status}`
      const issues = Array.isArray(json?.issues)
        ? `: ${json.issues.map((issue: any) => `${(issue.path ?? []).join(".") || "body"} ${issue.message}`).join("; ")}`
        : ""
      return yield* new CliError({ message: `${method} ${url.pathname} failed: ${code}${issues}` })
    }
    return json as A
  })
