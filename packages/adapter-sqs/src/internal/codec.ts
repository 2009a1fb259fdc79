/**
 * The wire form of a slowcall message on SQS. The body is the truth: a small JSON object marked `"slowcall": 1`
 * holding the job id, the routing hints and, for a delay beyond what one SQS call can hide, the instant it is due
 * (`notBefore`, epoch ms on the transport's clock). Message attributes repeat the job id, type, version and trace id
 * so that consoles, filters and other tools can read them without parsing the body. A receipt names one delivery:
 * the local time it was received (SQS's 12-hour visibility limit runs from there) and SQS's receipt handle.
 *
 * @internal
 */
import type { MessageAttributeValue } from "@aws-sdk/client-sqs"
import { JobId } from "@slowcall/core/Job"
import type { Message } from "@slowcall/core/Transport"
import { Either, ParseResult, Schema } from "effect"

const Body = Schema.Struct({
  slowcall: Schema.Literal(1),
  jobId: JobId,
  type: Schema.String.pipe(Schema.minLength(1)),
  version: Schema.Int,
  priority: Schema.optional(Schema.Number),
  tenant: Schema.optional(Schema.NullOr(Schema.String)),
  traceId: Schema.optional(Schema.NullOr(Schema.String)),
  attempts: Schema.optional(Schema.Int),
  notBefore: Schema.optional(Schema.Number)
})

/** @internal */
export type Body = typeof Body.Type

const decodeBody = Schema.decodeUnknownEither(Body)

/**
 * The body of `message`, due at `notBefore` when given.
 *
 * @internal
 */
export const encodeBody = (message: Message, notBefore?: number): string =>
  JSON.stringify({
    slowcall: 1,
    jobId: message.jobId,
    type: message.type,
    version: message.version,
    ...(message.priority === undefined ? {} : { priority: message.priority }),
    ...(message.tenant == null ? {} : { tenant: message.tenant }),
    ...(message.traceId == null ? {} : { traceId: message.traceId }),
    ...(message.attempts === undefined ? {} : { attempts: message.attempts }),
    ...(notBefore === undefined ? {} : { notBefore })
  })

/**
 * What a received body is: ours (`Ok`), not ours at all (`Foreign`: not JSON, or JSON without the marker), or
 * marked as ours but not a message this version can read (`Malformed`).
 *
 * @internal
 */
export type Parsed =
  | { readonly _tag: "Ok"; readonly body: Body }
  | { readonly _tag: "Foreign"; readonly reason: string }
  | { readonly _tag: "Malformed"; readonly reason: string }

/** @internal */
export const parseBody = (raw: string | undefined): Parsed => {
  if (raw === undefined) return { _tag: "Foreign", reason: "the message has no body" }
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    return { _tag: "Foreign", reason: "the body is not JSON" }
  }
  if (typeof json !== "object" || json === null || !("slowcall" in json)) {
    return { _tag: "Foreign", reason: "the body carries no slowcall marker" }
  }
  const decoded = decodeBody(json)
  if (Either.isRight(decoded)) return { _tag: "Ok", body: decoded.right }
  const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    .slice(0, 3)
    .map((issue) => `${issue.path.join(".") || "body"}: ${issue.message}`)
  return { _tag: "Malformed", reason: issues.join("; ") }
}

/**
 * The message attributes of `message`: job id, type, version and trace id (when it has one).
 *
 * @internal
 */
export const attributesOf = (message: Message): Record<string, MessageAttributeValue> => ({
  "slowcall.jobId": { DataType: "String", StringValue: message.jobId },
  "slowcall.type": { DataType: "String", StringValue: message.type },
  "slowcall.version": { DataType: "Number", StringValue: String(message.version) },
  ...(message.traceId == null ? {} : { "slowcall.traceId": { DataType: "String", StringValue: message.traceId } })
})

/**
 * The receipt of one delivery: when it was received (local ms) and SQS's receipt handle.
 *
 * @internal
 */
export const encodeReceipt = (receivedAt: number, handle: string): string => `${receivedAt}:${handle}`

/** @internal */
export const decodeReceipt = (
  receipt: string
): { readonly receivedAt: number; readonly handle: string } | undefined => {
  const at = receipt.indexOf(":")
  if (at <= 0) return undefined
  const receivedAt = Number(receipt.slice(0, at))
  const handle = receipt.slice(at + 1)
  return Number.isFinite(receivedAt) && handle.length > 0 ? { receivedAt, handle } : undefined
}

/**
 * A FIFO deduplication id from the job id and attempt (and, for a copy made to re-hide a message, the instant it
 * is due), so a publish repeated by the Client, the outbox relay or a retry within SQS's five minutes is sent once.
 *
 * @internal
 */
export const deduplicationId = (message: Message, notBefore?: number): string =>
  `${message.jobId}.${message.attempts ?? 0}${notBefore === undefined ? "" : `.h${notBefore}`}`

/** @internal */
export const messageOfBody = (body: Body): Message => ({
  jobId: body.jobId,
  type: body.type,
  version: body.version,
  priority: body.priority,
  tenant: body.tenant,
  traceId: body.traceId,
  attempts: body.attempts
})
