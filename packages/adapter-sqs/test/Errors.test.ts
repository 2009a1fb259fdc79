/**
 * Driver errors to `TransportError` (no server needed), the redrive rule, and the wire codec.
 */
import { describe, expect, it } from "vitest"
import * as Codec from "../src/internal/codec.js"
import { classify, toTransportError } from "../src/internal/errors.js"
import * as SqsRedrive from "../src/SqsRedrive.js"

const sdkError = (name: string, fault: "client" | "server", status: number) =>
  Object.assign(new Error(`${name} happened`), { name, $fault: fault, $metadata: { httpStatusCode: status } })

describe("SQS errors to TransportError", () => {
  it("throttling is Throttled; timeouts and aborts are Timeout; network and server faults are Connection", () => {
    expect(toTransportError("publish", sdkError("ThrottlingException", "client", 400)).reason).toBe("Throttled")
    expect(toTransportError("publish", sdkError("RequestThrottled", "client", 403)).reason).toBe("Throttled")
    expect(toTransportError("receive", sdkError("Anything", "client", 429)).reason).toBe("Throttled")
    expect(toTransportError("receive", Object.assign(new Error("t"), { name: "TimeoutError" })).reason).toBe("Timeout")
    expect(toTransportError("receive", Object.assign(new Error("a"), { name: "AbortError" })).reason).toBe("Timeout")
    expect(toTransportError("ack", Object.assign(new Error("r"), { code: "ECONNREFUSED" })).reason).toBe("Connection")
    expect(
      toTransportError("ack", Object.assign(new Error("w"), { cause: Object.assign(new Error(), { code: "EPIPE" }) }))
        .reason
    ).toBe("Connection")
    expect(toTransportError("extend", sdkError("InternalError", "server", 500)).reason).toBe("Connection")
  })

  it("a caller's mistake is Unknown (not retryable), with the operation and the SDK's message", () => {
    const error = toTransportError("receive (ReceiveMessage)", sdkError("QueueDoesNotExist", "client", 400))
    expect(error).toMatchObject({ reason: "Unknown", operation: "receive (ReceiveMessage)" })
    expect(error.isRetryable).toBe(false)
    expect(error.detail).toContain("QueueDoesNotExist")
    expect(classify(sdkError("AccessDenied", "client", 403))).toBe("client")
    expect(classify("a string")).toBe("client")
  })
})

describe("SqsRedrive.verdict", () => {
  const base = { visibilityTimeoutMs: 30_000, maxAttempts: 3, leaseMs: 30_000, receiveMargin: 2 }

  it("no redrive policy is safe", () => {
    expect(SqsRedrive.verdict({ ...base, maxReceiveCount: null })).toEqual({ _tag: "Safe" })
  })

  it("fewer receives than attempts plus margin is unsafe, naming the count that would be safe", () => {
    expect(SqsRedrive.verdict({ ...base, maxReceiveCount: 4 })).toEqual({
      _tag: "Unsafe",
      reason: "receives",
      neededReceiveCount: 5
    })
    expect(SqsRedrive.verdict({ ...base, maxReceiveCount: 5 })).toEqual({ _tag: "Safe" })
  })

  it("a window of receives × VisibilityTimeout shorter than attempts × lease is unsafe", () => {
    const input = { ...base, maxReceiveCount: 6, visibilityTimeoutMs: 10_000, leaseMs: 60_000 }
    expect(SqsRedrive.verdict(input)).toEqual({ _tag: "Unsafe", reason: "window", neededReceiveCount: 18 })
    expect(SqsRedrive.verdict({ ...input, maxReceiveCount: 18 })).toEqual({ _tag: "Safe" })
  })
})

describe("the wire codec", () => {
  const jobId = "01890a5d-ac96-774b-bcce-b302099a8057"

  it("a body round-trips with its hints and due time", () => {
    const body = Codec.encodeBody({ jobId: jobId as never, type: "t", version: 2, tenant: "a", attempts: 1 }, 1234)
    const parsed = Codec.parseBody(body)
    expect(parsed).toEqual({
      _tag: "Ok",
      body: { slowcall: 1, jobId, type: "t", version: 2, tenant: "a", attempts: 1, notBefore: 1234 }
    })
  })

  it("foreign and malformed bodies are told apart, each with a reason", () => {
    expect(Codec.parseBody(undefined)._tag).toBe("Foreign")
    expect(Codec.parseBody("hello")._tag).toBe("Foreign")
    expect(Codec.parseBody('{"order":1}')._tag).toBe("Foreign")
    const malformed = Codec.parseBody(JSON.stringify({ slowcall: 1, jobId: "x", type: "t", version: 1 }))
    expect(malformed._tag).toBe("Malformed")
    expect(malformed._tag === "Malformed" && malformed.reason).toContain("jobId")
  })

  it("receipts carry the receive time; deduplication ids the job and attempt", () => {
    expect(Codec.decodeReceipt(Codec.encodeReceipt(42, "AQE+/a=="))).toEqual({ receivedAt: 42, handle: "AQE+/a==" })
    expect(Codec.decodeReceipt("no-time")).toBeUndefined()
    expect(Codec.deduplicationId({ jobId: jobId as never, type: "t", version: 1, attempts: 2 })).toBe(`${jobId}.2`)
    expect(Codec.deduplicationId({ jobId: jobId as never, type: "t", version: 1 }, 99)).toBe(`${jobId}.0.h99`)
  })
})
