import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { ErrorClass } from "@slowcall/core/ErrorClass"
import type * as Handler from "@slowcall/core/Handler"
import type { JobId } from "@slowcall/core/Job"
import { normalize } from "@slowcall/core/Normalize"
import { Effect, Random } from "effect"
import * as Demo from "../src/Demo.js"
import { demoHandlers } from "../src/Serving.js"

describe("Demo", () => {
  it("failWith produces an error that normalises to the requested class", () => {
    // lease_expired is recorded by the store, never raised by a model: the closest provider failure stands in.
    const provider = ErrorClass.literals.filter((c) => c !== "lease_expired")
    for (const errorClass of provider) {
      expect(normalize(Demo.errorFor(errorClass)).errorClass, errorClass).toBe(errorClass)
    }
    expect(normalize(Demo.errorFor("lease_expired")).errorClass).toBe("unknown")
    expect(normalize(Demo.errorFor("rate_limited")).retryAfterMs).toBe(1000)
  })

  it.effect("latency is heavy tailed and reproducible under a seeded Random", () =>
    Effect.gen(function* () {
      const draw = Effect.replicateEffect(Demo.heavyTailedLatency(200), 2000)
      const a = yield* Effect.withRandom(draw, Random.make(7))
      const b = yield* Effect.withRandom(draw, Random.make(7))
      expect(a).toEqual(b)
      const sorted = [...a].sort((x, y) => x - y)
      const median = sorted[1000]!
      const p99 = sorted[1980]!
      expect(median).toBeGreaterThan(150)
      expect(median).toBeLessThan(260)
      // A long tail: the 99th percentile is several times the median.
      expect(p99 / median).toBeGreaterThan(4)
    })
  )

  it("each demo handler declares its estimate and its type", () => {
    expect(Demo.handlers.map((h) => h.type)).toEqual(["demo.echo", "demo.summarize", "demo.embed"])
    const [echo, summarize, embed] = Demo.handlers
    expect(typeof echo.estimateCents === "function" && echo.estimateCents({ text: "x" })).toBe(1)
    expect(typeof echo.estimateCents === "function" && echo.estimateCents({ text: "x", costCents: 7 })).toBe(7)
    expect(typeof summarize.estimateCents === "function" && summarize.estimateCents({ text: "y".repeat(4001) })).toBe(5)
    expect(typeof embed.estimateCents === "function" && embed.estimateCents({ texts: ["a", "b", "c", "d", "e"] })).toBe(
      2
    )
  })
})

describe("demo.model", () => {
  it.effect("posts the job id, lease token and cost to the model server and costs what the server billed", () =>
    Effect.gen(function* () {
      const received: Array<Record<string, unknown>> = []
      const server = createServer((request, response) => {
        let body = ""
        request.on("data", (chunk) => {
          body += chunk
        })
        request.on("end", () => {
          received.push(JSON.parse(body))
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ costCents: 3 }))
        })
      })
      yield* Effect.acquireRelease(
        Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))),
        () => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
      )
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/call`
      const handler = Demo.model(url)
      expect(handler.type).toBe("demo.model")
      // A 5 s call timeout and the 1 s margin.
      expect(handler.leaseMs).toBe(6_000)
      const costs: Array<number> = []
      const ctx = {
        jobId: "job-1" as JobId,
        token: 4,
        attempt: 1,
        traceId: null,
        progress: () => Effect.void,
        checkpoint: Effect.void,
        call: (options: Handler.CallOptions<any, any, any>) =>
          Effect.tap(options.run, (result) => Effect.sync(() => costs.push(options.cost(result))))
      } as unknown as Handler.HandlerContext
      const result = yield* handler.run({ text: "hi", costCents: 3 }, ctx)
      // The result names the lease token it was made under.
      expect(result).toEqual({ costCents: 3, token: 4 })
      expect(costs).toEqual([3])
      expect(received).toEqual([{ jobId: "job-1", token: 4, attempt: 1, pid: process.pid, text: "hi", costCents: 3 }])
    }).pipe(Effect.scoped)
  )

  it.effect("a call the server refuses, or no server at all, fails as a provider error charged its estimate", () =>
    Effect.gen(function* () {
      const charged: Array<number | undefined> = []
      const ctx = {
        jobId: "job-2" as JobId,
        token: 1,
        attempt: 1,
        traceId: null,
        progress: () => Effect.void,
        checkpoint: Effect.void,
        call: (options: Handler.CallOptions<any, any, any>) =>
          Effect.tapError(options.run, (error) => Effect.sync(() => charged.push(options.costOnError?.(error))))
      } as unknown as Handler.HandlerContext
      const error = yield* Effect.flip(Demo.model("http://127.0.0.1:9/call").run({ text: "x", costCents: 2 }, ctx))
      expect(error).toBeInstanceOf(Demo.SimulatedModelError)
      expect(normalize(error).errorClass).toBe("network")
      expect(charged).toEqual([2])
    })
  )

  it("serve registers it only with --demo and a model URL", () => {
    expect(demoHandlers({ demo: true }).map((h) => h.type)).toEqual(["demo.echo", "demo.summarize", "demo.embed"])
    expect(demoHandlers({ demo: true, demoModelUrl: "http://127.0.0.1:1/call" }).map((h) => h.type)).toContain(
      "demo.model"
    )
    expect(demoHandlers({ demo: false, demoModelUrl: "http://127.0.0.1:1/call" })).toEqual([])
  })
})
