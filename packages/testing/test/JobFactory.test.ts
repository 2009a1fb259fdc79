import { describe, expect, it } from "@effect/vitest"
import { inputHash } from "@slowcall/core/Canonical"
import { JobId } from "@slowcall/core/Job"
import { Effect, Schema } from "effect"
import { makeJobFactory } from "../src/JobFactory.js"

describe("makeJobFactory", () => {
  it.effect("gives a fresh valid job id every call and a hash that matches the input", () =>
    Effect.gen(function* () {
      const factory = makeJobFactory()
      const a = yield* factory.submitItem({ queue: "q" })
      const b = yield* factory.submitItem({ queue: "q", input: { z: 1, a: [true] }, maxAttempts: 7 })
      expect(a.id).not.toBe(b.id)
      expect(Schema.is(JobId)(a.id)).toBe(true)
      expect(a.inputHash).toBe(yield* inputHash(a.input))
      expect(b).toMatchObject({ queue: "q", input: { z: 1, a: [true] }, maxAttempts: 7, type: "conformance.echo" })
      expect(b.inputHash).toBe(yield* inputHash({ a: [true], z: 1 }))
    })
  )

  it.effect("two factories at the same clock time never repeat an id or a name", () =>
    Effect.gen(function* () {
      const first = makeJobFactory()
      const second = makeJobFactory()
      const ids = new Set<string>()
      for (let i = 0; i < 50; i++) {
        ids.add((yield* first.submitItem({ queue: "q" })).id)
        ids.add((yield* second.submitItem({ queue: "q" })).id)
        ids.add(yield* first.jobId)
      }
      expect(ids.size).toBe(150)
      for (const id of ids) expect(Schema.is(JobId)(id)).toBe(true)
      expect(first.uniqueName("q")).not.toBe(second.uniqueName("q"))
      expect(first.uniqueName("q")).not.toBe(first.uniqueName("q"))
    })
  )
})
