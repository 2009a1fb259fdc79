/**
 * AWS SDK and network failures to `TransportError`, in one exhaustive switch. Throttling and server faults are
 * retryable (SQS asks to be called again), a lost or refused connection and a timeout are retryable, and whatever
 * names a caller's mistake (no such queue, access denied, a bad parameter) is `Unknown`: repeating it changes
 * nothing.
 *
 * @internal
 */
import { TransportError } from "@slowcall/core/Errors"

/** @internal */
export type ErrorKind = "throttled" | "timeout" | "connection" | "server" | "aborted" | "client"

const NETWORK_ERRNOS = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET"
])

const THROTTLED = new Set([
  "ThrottlingException",
  "Throttling",
  "RequestThrottled",
  "RequestThrottledException",
  "TooManyRequestsException",
  "OverLimit",
  "KmsThrottled",
  "SlowDown"
])

const TIMEOUTS = new Set(["TimeoutError", "RequestTimeout", "RequestTimeoutException"])

const field = (error: unknown, name: string): unknown =>
  typeof error === "object" && error !== null ? (error as Record<string, unknown>)[name] : undefined

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/**
 * Which kind of failure an error is. Pure: no server needed to test it.
 *
 * @internal
 */
export const classify = (error: unknown): ErrorKind => {
  const name = text(field(error, "name")) ?? ""
  const code = text(field(error, "code")) ?? text(field(error, "Code")) ?? ""
  const metadata = field(error, "$metadata")
  const status = typeof metadata === "object" && metadata !== null ? field(metadata, "httpStatusCode") : undefined
  if (name === "AbortError") return "aborted"
  if (THROTTLED.has(name) || THROTTLED.has(code) || status === 429) return "throttled"
  if (TIMEOUTS.has(name) || TIMEOUTS.has(code)) return "timeout"
  if (NETWORK_ERRNOS.has(code) || NETWORK_ERRNOS.has(name)) return "connection"
  const cause = field(error, "cause")
  if (cause !== undefined && cause !== error && classify(cause) === "connection") return "connection"
  if (field(error, "$fault") === "server" || (typeof status === "number" && status >= 500)) return "server"
  return "client"
}

/**
 * A failed SQS call as the seam's error. `operation` names the Transport verb (and the SQS action).
 *
 * @internal
 */
export const toTransportError = (operation: string, error: unknown): TransportError => {
  const kind = classify(error)
  const detail = `${text(field(error, "name")) ?? "Error"}: ${text(field(error, "message")) ?? String(error)}`
  switch (kind) {
    case "throttled":
      return new TransportError({ reason: "Throttled", operation, detail })
    case "timeout":
    case "aborted":
      return new TransportError({ reason: "Timeout", operation, detail })
    case "connection":
    case "server":
      return new TransportError({ reason: "Connection", operation, detail })
    case "client":
      return new TransportError({ reason: "Unknown", operation, detail })
  }
}
