import { Schema } from "effect"
import * as v from "valibot"
import { afterEach, describe, expect, it } from "vitest"
import * as z from "zod"
import { InvalidInput, open, type Queue, StandardSchema } from "../src/index.js"

const queues: Array<Queue> = []
afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close()
})

// The same contract in three validators: text is a non-empty string, count defaults to 1 (the handler sees the
// validator's output, not the stored input).
const libraries = [
  {
    name: "zod",
    input: z.object({ text: z.string().min(1), count: z.number().int().default(1) }),
    result: z.object({ summary: z.string() })
  },
  {
    name: "valibot",
    input: v.object({ text: v.pipe(v.string(), v.minLength(1)), count: v.optional(v.number(), 1) }),
    result: v.object({ summary: v.string() })
  },
  {
    name: "effect Schema",
    input: Schema.standardSchemaV1(
      Schema.Struct({
        text: Schema.String.pipe(Schema.minLength(1)),
        count: Schema.optionalWith(Schema.Number, { default: () => 1 })
      })
    ),
    result: Schema.standardSchemaV1(Schema.Struct({ summary: Schema.String }))
  }
] as const

describe.each(libraries)("Standard Schema validation with $name", ({ input, result }) => {
  it("is recognised as a Standard Schema v1", () => {
    expect(StandardSchema.isStandardSchema(input)).toBe(true)
    expect(StandardSchema.isStandardSchema({ validate: () => true })).toBe(false)
  })

  it("invalid input at submit is InvalidInput with the validator's issues, and nothing is written", async () => {
    const queue = await open({
      url: "memory:",
      handlers: { summarize: { input, run: async (i: { text: string }) => ({ summary: i.text }) } }
    })
    queues.push(queue)

    const error = await queue.submit("summarize", { text: 42 }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput).issues[0]?.path).toEqual(["text"])
    expect(await queue.list()).toEqual([])
  })

  it("submitMany names the item whose input is invalid and writes none of them", async () => {
    const queue = await open({
      url: "memory:",
      handlers: { summarize: { input, run: async (i: { text: string }) => ({ summary: i.text }) } }
    })
    queues.push(queue)

    const error = await queue
      .submitMany([
        { type: "summarize", input: { text: "ok" } },
        { type: "summarize", input: { text: "" } }
      ])
      .catch((e: unknown) => e)

    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput).issues[0]?.path).toEqual([1, "text"])
    expect(await queue.list()).toEqual([])
  })

  it("the handler gets the validated output and its result is checked by the result schema", async () => {
    const queue = await open({ url: "memory:", watchIntervalMs: 20 })
    queues.push(queue)
    const worker = queue.worker({
      handlers: {
        summarize: {
          input,
          result,
          run: async (i: { text: string; count: number }) => ({ summary: i.text.repeat(i.count) })
        },
        broken: { input, result, run: async () => ({ summary: 7 }) }
      }
    })
    await worker.start()

    const ok = await queue.submit("summarize", { text: "ab" })
    const bad = await queue.submit("broken", { text: "ab" })
    const done = await queue.wait(ok.id, { timeoutMs: 10_000 })
    const failed = await queue.wait(bad.id, { timeoutMs: 10_000 })

    expect(done.state).toBe("succeeded")
    expect(done.result).toEqual({ summary: "ab" })
    expect(failed.state).toBe("failed")
    expect(failed.lastError).toContain("result")
  })

  it("input written by a submitter that did not know the schema fails the job invalid_input, never calling run", async () => {
    const submitter = await open({ url: "memory:", watchIntervalMs: 20 })
    queues.push(submitter)
    let runs = 0
    const { id } = await submitter.submit("summarize", { text: 42 })
    const worker = submitter.worker({
      handlers: {
        summarize: {
          input,
          run: async () => {
            runs += 1
            return { summary: "never" }
          }
        }
      }
    })

    await worker.start()
    const failed = await submitter.wait(id, { timeoutMs: 10_000 })

    expect(failed.state).toBe("failed")
    expect(failed.errorClass).toBe("invalid_input")
    expect(runs).toBe(0)
  })
})
