/**
 * Error normalisation and the server warnings, without a server: each ioredis or Redis failure maps to the
 * documented `StoreError`/`TransportError` reason, and each persistence or eviction setting to its warning.
 */
import { describe, expect, it } from "@effect/vitest"
import { classify, toStoreError, toTransportError } from "../src/internal/errors.js"
import { durabilityOf, warningsOf } from "../src/internal/server.js"

const replyError = (message: string) => Object.assign(new Error(message), { name: "ReplyError" })

describe("classify", () => {
  it("names every kind of failure", () => {
    expect(classify(new Error("Command timed out"))).toBe("command_timeout")
    expect(classify(new Error("Connection is closed."))).toBe("connection_lost")
    expect(classify(Object.assign(new Error("Reached the max retries"), { name: "MaxRetriesPerRequestError" }))).toBe(
      "connection_lost"
    )
    expect(classify(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe("socket")
    expect(classify(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe("not_connected")
    expect(classify(new Error("None of startup nodes is available"))).toBe("not_connected")
    for (const word of ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"]) {
      expect(classify(replyError(`${word} something`))).toBe("unavailable")
    }
    expect(classify(replyError("OOM command not allowed when used memory > 'maxmemory'."))).toBe("out_of_memory")
    expect(classify(replyError("ERR user_script:12: Script attempted to access nonexistent global"))).toBe("script")
    expect(classify("something else")).toBe("other")
  })
})

describe("toStoreError", () => {
  it("a write that may have reached the server is Ambiguous; a read of the same failure is not", () => {
    expect(toStoreError("claim", new Error("Command timed out"), true).reason).toBe("Ambiguous")
    expect(toStoreError("get", new Error("Command timed out"), false).reason).toBe("Timeout")
    expect(toStoreError("settle", new Error("Connection is closed."), true).reason).toBe("Ambiguous")
    expect(toStoreError("get", new Error("Connection is closed."), false).reason).toBe("Connection")
  })

  it("a refused command is Connection (retryable, not applied); a bug is Unknown (not retryable)", () => {
    const refused = toStoreError("claim", replyError("LOADING Redis is loading the dataset in memory"), true)
    expect(refused).toMatchObject({ reason: "Connection", operation: "claim" })
    expect(refused.isRetryable).toBe(true)
    const bug = toStoreError("claim", replyError("ERR Error running script"), true)
    expect(bug.reason).toBe("Unknown")
    expect(bug.isRetryable).toBe(false)
    expect(toStoreError("submit", replyError("OOM command not allowed"), true).reason).toBe("Unknown")
  })
})

describe("toTransportError", () => {
  it("maps timeouts, connections, memory and bugs", () => {
    expect(toTransportError("receive", new Error("Command timed out")).reason).toBe("Timeout")
    expect(toTransportError("receive", new Error("Connection is closed.")).reason).toBe("Connection")
    expect(toTransportError("receive", replyError("OOM command not allowed")).reason).toBe("Throttled")
    expect(toTransportError("receive", replyError("ERR user_script:1: oops")).reason).toBe("Unknown")
  })
})

describe("warningsOf", () => {
  const node = { node: "127.0.0.1:6379", appendfsync: "everysec" }

  it("a server that keeps nothing on disk, or evicts keys, is named for what it can lose", () => {
    const none = warningsOf({ ...node, appendonly: "no", save: "", maxmemoryPolicy: "allkeys-lru" })
    expect(none).toHaveLength(2)
    expect(none[0]).toContain("keeps nothing on disk")
    expect(none[1]).toContain("maxmemory-policy allkeys-lru")
    expect(warningsOf({ ...node, appendonly: "no", save: "3600 1", maxmemoryPolicy: "noeviction" })[0]).toContain(
      "since the last RDB snapshot"
    )
    expect(
      warningsOf({ ...node, appendonly: "yes", appendfsync: "no", save: "", maxmemoryPolicy: "noeviction" })[0]
    ).toContain("without fsync")
  })

  it("AOF with fsync and noeviction gives no warning", () => {
    expect(warningsOf({ ...node, appendonly: "yes", save: "", maxmemoryPolicy: "noeviction" })).toEqual([])
    expect(
      warningsOf({ ...node, appendonly: "yes", appendfsync: "always", save: "", maxmemoryPolicy: "noeviction" })
    ).toEqual([])
  })
})

describe("durabilityOf", () => {
  const node = { node: "127.0.0.1:6379", save: "", maxmemoryPolicy: "noeviction" }

  it("everysec: a machine crash can lose up to a second of acknowledged jobs, and always is named as the cure", () => {
    const [line] = durabilityOf({ ...node, appendonly: "yes", appendfsync: "everysec" })
    expect(line).toContain("a crash of Redis alone loses nothing")
    expect(line).toContain("up to a second of acknowledged jobs")
    expect(line).toContain("appendfsync always loses none")
  })

  it("always loses nothing; without an append-only file the warnings speak instead", () => {
    expect(durabilityOf({ ...node, appendonly: "yes", appendfsync: "always" })[0]).toContain(
      "loses no acknowledged job"
    )
    expect(durabilityOf({ ...node, appendonly: "no", appendfsync: "everysec" })).toEqual([])
    expect(durabilityOf({ ...node, appendonly: "yes", appendfsync: "no" })).toEqual([])
  })
})
