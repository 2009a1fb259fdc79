/**
 * The one logger of the `slowcall` process: every log line, whatever logged it (the server, the worker, an adapter),
 * is formatted once, redacted by `Redact.redact` (the rules evidence goes through), and written once to stderr, so
 * stdout keeps only what a command prints. Text lines by default:
 *
 *   2026-12-05T10:00:00.000Z WARN  job 0190… (demo.echo) attempt 1 of 3 failed: rate_limited … jobId=0190…
 *
 * or one JSON object per line (`time`, `level`, `message`, `error` when the entry carries a failure, then the
 * annotations). An `Error` is shown by its message (with its tag and the messages of its causes), never as `{}`.
 * The message and the failure are redacted as text; each annotation with its name (`redactField`), so the line's
 * shape, JSON included, is never broken by a redaction.
 *
 * @internal
 */
import * as Redact from "@slowcall/core/Redact"
import { Cause, Effect, FiberRef, HashMap, HashSet, Layer, Logger, LogLevel } from "effect"

/** How lines are written. @internal */
export type LogFormat = "text" | "json"

/** The minimum levels `layer` takes, least severe first. @internal */
export const levels = ["debug", "info", "warn", "error"] as const

/** @internal */
export type Level = (typeof levels)[number]

const logLevelOf: Record<Level, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error
}

/** An error's own words: its message (or tag), then those of its causes that add something. @internal */
export const errorText = (error: unknown, depth = 0): string => {
  if (!(error instanceof Error) && (typeof error !== "object" || error === null)) return String(error)
  const record = error as { readonly message?: unknown; readonly _tag?: unknown; readonly cause?: unknown }
  const tag = typeof record._tag === "string" ? record._tag : error instanceof Error ? error.name : undefined
  const message = typeof record.message === "string" && record.message !== "" ? record.message : undefined
  const own =
    message === undefined
      ? (tag ?? safeJson(error))
      : tag !== undefined && tag !== "Error"
        ? `${tag}: ${message}`
        : message
  const cause = record.cause
  if (depth >= 3 || cause === undefined || cause === null) return own
  const next = Cause.isCause(cause) ? causeText(cause) : errorText(cause, depth + 1)
  // The cause goes last, after a separator a redaction cannot swallow (a header value runs to the end of the line).
  return next === "" || own.includes(next) ? own : `${own}; cause: ${next}`
}

/** A failure's errors and defects, each by `errorText`; "" for an empty cause. @internal */
export const causeText = (cause: Cause.Cause<unknown>): string => {
  const parts = [...Cause.failures(cause), ...Cause.defects(cause)].map((error) => errorText(error))
  if (parts.length === 0 && Cause.isInterrupted(cause)) parts.push("interrupted")
  return parts.join("; ")
}

const safeJson = (value: unknown): string => {
  try {
    return (
      JSON.stringify(value, (_key, inner) =>
        inner instanceof Error ? errorText(inner) : typeof inner === "bigint" ? inner.toString() : inner
      ) ?? String(value)
    )
  } catch {
    return String(value)
  }
}

const partText = (part: unknown): string =>
  typeof part === "string"
    ? part
    : Cause.isCause(part)
      ? causeText(part)
      : part instanceof Error
        ? errorText(part)
        : safeJson(part)

/** The message of an entry: its parts (`Effect.log("what", error)` gives two) joined by ": ". */
const messageText = (message: unknown): string =>
  (Array.isArray(message) ? message : [message])
    .map(partText)
    .filter((text) => text !== "")
    .join(": ")

const annotationValue = (value: unknown): unknown =>
  value instanceof Error ? errorText(value) : Cause.isCause(value) ? causeText(value) : value

/** A text value quoted when it holds spaces, quotes or `=`, as logfmt does. */
const quoted = (text: string): string => (/[\s"=]/.test(text) || text === "" ? JSON.stringify(text) : text)

/**
 * An annotation's value as it may be written: a number or boolean as it is (a lease `token` of 3 is no secret); text
 * redacted with its name in front, so both the value's own form (`sk-…`, `Bearer …`, a URL's password) and a name
 * that says it is secret (`apiKey`, `password`) are caught.
 */
const redactField = (key: string, value: unknown): unknown => {
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return value
  const text = typeof value === "string" ? value : safeJson(value)
  const redacted = Redact.redact(`${key}=${text}`)
  return redacted.startsWith(`${key}=`) ? redacted.slice(key.length + 1) : Redact.marker
}

/**
 * One formatted, redacted line per entry (no newline), handed to `write`.
 *
 * @internal
 */
export const make = (format: LogFormat, write: (line: string) => void): Logger.Logger<unknown, void> =>
  Logger.make(({ annotations, cause, date, logLevel, message }) => {
    const text = Redact.redact(messageText(message))
    const error = Cause.isEmpty(cause) ? "" : Redact.redact(causeText(cause))
    const fields = [...HashMap.toEntries(annotations)].map(
      ([key, value]) => [key, redactField(key, annotationValue(value))] as const
    )
    if (format === "json") {
      const entry: Record<string, unknown> = {
        time: date.toISOString(),
        level: logLevel.label.toLowerCase(),
        message: text
      }
      if (error !== "") entry.error = error
      for (const [key, value] of fields) if (!(key in entry)) entry[key] = value
      write(safeJson(entry))
      return
    }
    const tail = fields
      .map(([key, value]) => ` ${key}=${quoted(typeof value === "string" ? value : safeJson(value))}`)
      .join("")
    const body = text === "" ? error : error === "" ? text : `${text}: ${error}`
    write(`${date.toISOString()} ${logLevel.label.padEnd(5)} ${body}${tail}`)
  })

/** Writes a line to stderr. */
const toStderr = (line: string): void => {
  process.stderr.write(`${line}\n`)
}

/**
 * The process's logging below the point it is provided: this logger as the only one that writes (whatever was
 * installed before it, Effect's default or a pretty one, is gone, so no line is ever written twice or unredacted),
 * at `level` and up (without one, the level already in place).
 * `internal/main.ts` provides it for every command; `serve` provides it again with its `--log-format` and
 * `--log-level`.
 *
 * @internal
 */
export const layer = (
  options: { readonly format: LogFormat; readonly level?: Level | undefined },
  write: (line: string) => void = toStderr
): Layer.Layer<never> =>
  Layer.merge(
    Layer.scopedDiscard(
      // Only the tracer's logger (which adds log entries to the current span as events, writing nothing) is kept.
      Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) =>
        HashSet.add(
          HashSet.filter(loggers, (logger) => logger === Logger.tracerLogger),
          make(options.format, write)
        )
      )
    ),
    options.level === undefined ? Layer.empty : Logger.minimumLogLevel(logLevelOf[options.level])
  )
