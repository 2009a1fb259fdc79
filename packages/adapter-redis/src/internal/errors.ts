/**
 * ioredis and Redis errors to `StoreError` and `TransportError`, in one exhaustive switch. A command that may have
 * reached the server before its connection went away or its timeout fired is `Ambiguous` for a write (it may have
 * applied); every other failure says the command did not run.
 *
 * @internal
 */
import { StoreError, TransportError } from "@slowcall/core/Errors"

/** @internal */
export type ErrorKind =
  /** ioredis's `commandTimeout` fired: the command may have run. */
  | "command_timeout"
  /** The connection closed with the command in flight: it may have run. */
  | "connection_lost"
  /** A socket error on the command itself. */
  | "socket"
  /** The command never left: the client is closed for good, or the Cluster has no node to send it to. */
  | "not_connected"
  /** The server refused to run it now: loading, a busy script, a Cluster that is down or moving, a replica. */
  | "unavailable"
  /** The server is out of memory under `noeviction`: writes are refused until memory is freed. */
  | "out_of_memory"
  /** A script failed: a bug. */
  | "script"
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

const UNAVAILABLE = ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"]

const fieldOf = (error: unknown, field: string): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const value = (error as Record<string, unknown>)[field]
  return typeof value === "string" ? value : undefined
}

/**
 * Which kind of failure an error is. Pure: no server needed to test it.
 *
 * @internal
 */
export const classify = (error: unknown): ErrorKind => {
  const name = fieldOf(error, "name") ?? ""
  const message = fieldOf(error, "message") ?? ""
  const code = fieldOf(error, "code")
  if (message === "Command timed out") return "command_timeout"
  // ioredis fails the commands in flight with MaxRetriesPerRequestError when their connection closes (the
  // adapter's clients allow no retries): each may have reached the server.
  if (message === "Connection is closed." || name === "MaxRetriesPerRequestError") return "connection_lost"
  if (message.startsWith("Stream isn't writeable")) return "not_connected"
  if (message.startsWith("None of startup nodes is available") || message.startsWith("Failed to refresh slots")) {
    return "not_connected"
  }
  if (code !== undefined && SOCKET_ERRNOS.has(code)) return "socket"
  if (name === "ReplyError" || fieldOf(error, "command") !== undefined || /^[A-Z]+ /.test(message)) {
    const word = message.split(" ", 1)[0] ?? ""
    if (UNAVAILABLE.includes(word)) return "unavailable"
    if (word === "OOM") return "out_of_memory"
    if (message.includes("script") || message.includes("user_script")) return "script"
  }
  return "other"
}

const detailOf = (kind: ErrorKind, error: unknown): string =>
  `${kind}: ${(fieldOf(error, "message") ?? String(error)).slice(0, 500)}`

/**
 * The `StoreError` of a failed command. `write` tells whether the command could have changed data, which decides
 * between `Ambiguous` and `Timeout`/`Connection` for a command that may have reached the server.
 *
 * @internal
 */
export const toStoreError = (operation: string, error: unknown, write: boolean): StoreError => {
  if (error instanceof StoreError) return error
  const kind = classify(error)
  const detail = detailOf(kind, error)
  switch (kind) {
    case "command_timeout":
      return new StoreError({ reason: write ? "Ambiguous" : "Timeout", operation, detail })
    case "connection_lost":
    case "socket":
      return new StoreError({ reason: write ? "Ambiguous" : "Connection", operation, detail })
    case "not_connected":
    case "unavailable":
      return new StoreError({ reason: "Connection", operation, detail })
    case "out_of_memory":
    case "script":
    case "other":
      return new StoreError({ reason: "Unknown", operation, detail })
    default: {
      const exhaustive: never = kind
      return exhaustive
    }
  }
}

/**
 * The `TransportError` of a failed command: a transport failure only delays work, so there is no ambiguity to
 * report.
 *
 * @internal
 */
export const toTransportError = (operation: string, error: unknown): TransportError => {
  if (error instanceof TransportError) return error
  const kind = classify(error)
  const detail = detailOf(kind, error)
  switch (kind) {
    case "command_timeout":
      return new TransportError({ reason: "Timeout", operation, detail })
    case "connection_lost":
    case "socket":
    case "not_connected":
    case "unavailable":
      return new TransportError({ reason: "Connection", operation, detail })
    case "out_of_memory":
      return new TransportError({ reason: "Throttled", operation, detail })
    case "script":
    case "other":
      return new TransportError({ reason: "Unknown", operation, detail })
    default: {
      const exhaustive: never = kind
      return exhaustive
    }
  }
}
