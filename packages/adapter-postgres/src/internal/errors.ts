/**
 * Driver errors to `StoreError`, in one exhaustive switch. node-postgres and PGlite both surface the server's
 * SQLSTATE as `code`; socket failures carry a Node errno as `code`; node-postgres's own client-side failures
 * (read timeout, a connection that ended mid-query) carry only a message.
 *
 * @internal
 */
import { StoreError } from "@slowcall/core/Errors"

/** @internal */
export type ErrorKind =
  | "serialization"
  | "deadlock"
  | "statement_timeout"
  | "server_shutdown"
  | "connection_exception"
  | "too_many_connections"
  | "unique_violation"
  | "integrity_violation"
  | "unstorable_value"
  | "socket"
  | "connect_timeout"
  | "read_timeout"
  | "connection_lost"
  | "other"

const SOCKET_ERRNOS = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN"
])

const fieldOf = (error: unknown, field: string): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const value = (error as Record<string, unknown>)[field]
  return typeof value === "string" ? value : undefined
}

/**
 * Which kind of failure a driver error is. Pure: no server needed to test it.
 *
 * @internal
 */
export const classify = (error: unknown): ErrorKind => {
  const code = fieldOf(error, "code")
  if (code !== undefined) {
    if (code === "40001") return "serialization"
    if (code === "40P01") return "deadlock"
    if (code === "57014") return "statement_timeout"
    if (code === "57P01" || code === "57P02" || code === "57P03") return "server_shutdown"
    if (code === "53300") return "too_many_connections"
    if (code.startsWith("08")) return "connection_exception"
    if (code === "23505") return "unique_violation"
    if (code.startsWith("23")) return "integrity_violation"
    // A value the server cannot keep: U+0000 in jsonb (22P05) or a NUL byte in text (22021). Sending it again
    // fails the same way, so it is final for this input.
    if (code === "22P05" || code === "22021") return "unstorable_value"
    if (SOCKET_ERRNOS.has(code)) return "socket"
  }
  const message = fieldOf(error, "message") ?? ""
  if (message === "Query read timeout") return "read_timeout"
  if (
    message.includes("timeout exceeded when trying to connect") ||
    message.includes("Connection terminated due to connection timeout")
  ) {
    return "connect_timeout"
  }
  if (
    message.includes("Connection terminated") ||
    message.includes("Client has encountered a connection error") ||
    message.includes("Client was closed") ||
    message.includes("not queryable")
  ) {
    return "connection_lost"
  }
  return "other"
}

/**
 * The `StoreError` for a driver error. `Ambiguous` is reserved for failures after the statement may have reached
 * the server (a read timeout, a connection lost mid-statement); every other reason means nothing was applied.
 *
 * @internal
 */
export const toStoreError = (operation: string, error: unknown): StoreError => {
  if (error instanceof StoreError) return error
  const kind = classify(error)
  const detail = `${fieldOf(error, "code") ?? kind}: ${(fieldOf(error, "message") ?? String(error)).slice(0, 500)}`
  switch (kind) {
    case "serialization":
    case "deadlock":
      return new StoreError({ reason: "Conflict", operation, detail })
    case "statement_timeout":
    case "connect_timeout":
      return new StoreError({ reason: "Timeout", operation, detail })
    case "read_timeout":
    case "connection_lost":
      return new StoreError({ reason: "Ambiguous", operation, detail })
    case "server_shutdown":
    case "connection_exception":
    case "too_many_connections":
    case "socket":
      return new StoreError({ reason: "Connection", operation, detail })
    case "unique_violation":
    case "integrity_violation":
    case "unstorable_value":
      return new StoreError({ reason: "Constraint", operation, detail })
    case "other":
      return new StoreError({ reason: "Unknown", operation, detail })
    default: {
      const exhaustive: never = kind
      return exhaustive
    }
  }
}
