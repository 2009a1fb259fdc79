import { afterEach, describe, expect, it } from "vitest"
import {
  AlreadyTerminal,
  ConfigError,
  InvalidInput,
  type JobContext,
  KeyReused,
  NotFound,
  open,
  type Queue,
  StoreUnavailable,
  Timeout
} from "../src/index.js"

const queues: Array<Queue> = []
const openMemory = async (options: Partial<Parameters<typeof open>[0]> = {}) => {
  const queue = await open({ url: "memory:", watchIntervalMs: 20, ...options })
  queues.push(queue)
  return queue
}

afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close()
})

const echo = { echo: async (input: { text: string }) => ({ text: input.text }) }

describe("Queue", () => {
  it("submit stores the job with its options and an idempotent repeat returns the same job", async () => {
    const queue = await openMemory({ queue: "jobs" })
    const deadline = new Date(Date.now() + 60_000)

    const first = await queue.submit(
      "echo",
      { text: "a" },
      { key: "k1", priority: 3, budgetCents: 50, deadline, maxAttempts: 5, tenant: "t1", traceId: "trace-1" }
    )
    const again = await queue.submit(
      "echo",
      { text: "a" },
      { key: "k1", priority: 3, budgetCents: 50, deadline, maxAttempts: 5, tenant: "t1" }
    )

    expect(first.created).toBe(true)
    expect(again.created).toBe(false)
    expect(again.id).toBe(first.id)
    expect(first.job).toMatchObject({
      queue: "jobs",
      type: "echo",
      state: "queued",
      priority: 3,
      budgetCents: 50,
      deadlineAt: deadline.getTime(),
      maxAttempts: 5,
      tenant: "t1",
      traceId: "trace-1"
    })
  })

  it("a key reused with other input is KeyReused and writes nothing", async () => {
    const queue = await openMemory()
    const first = await queue.submit("echo", { text: "a" }, { key: "k" })

    const error = await queue.submit("echo", { text: "b" }, { key: "k" }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(KeyReused)
    expect((error as KeyReused).existingJobId).toBe(first.id)
    expect((error as KeyReused).cause).toMatchObject({ _tag: "IdempotencyKeyReused" })
    expect(await queue.list()).toHaveLength(1)
  })

  it("delayMs keeps a job queued until it is due", async () => {
    const queue = await openMemory()

    const { job } = await queue.submit("echo", { text: "later" }, { delayMs: 60_000 })

    expect(job.runAfter - job.createdAt).toBeGreaterThanOrEqual(59_000)
  })

  it("input that is not plain JSON is InvalidInput before anything is written", async () => {
    const queue = await openMemory()

    const error = await queue.submit("echo", { when: new Date() }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput).issues.length).toBeGreaterThan(0)
    expect(await queue.list()).toEqual([])
  })

  it("submitMany answers each item in order: created, existing, key reused", async () => {
    const queue = await openMemory()
    const existing = await queue.submit("echo", { text: "a" }, { key: "a" })

    const results = await queue.submitMany([
      { type: "echo", input: { text: "new" } },
      { type: "echo", input: { text: "a" }, key: "a" },
      { type: "echo", input: { text: "other" }, key: "a" }
    ])

    expect(results.map((r) => r.status)).toEqual(["created", "existing", "key_reused"])
    expect(results[1]).toMatchObject({ id: existing.id })
    expect(results[2]).toMatchObject({ key: "a", existingJobId: existing.id })
    expect(await queue.list()).toHaveLength(2)
  })

  it("get returns the job; an unknown id is NotFound, a malformed one InvalidInput", async () => {
    const queue = await openMemory()
    const { id } = await queue.submit("echo", { text: "a" })

    const job = await queue.get(id)
    const missing = await queue.get("01890000-0000-7000-8000-000000000000").catch((e: unknown) => e)
    const malformed = await queue.get("nope").catch((e: unknown) => e)

    expect(job.id).toBe(id)
    expect(missing).toBeInstanceOf(NotFound)
    expect(malformed).toBeInstanceOf(InvalidInput)
  })

  it("cancel ends a queued job abandoned(cancelled); cancelling it again is AlreadyTerminal", async () => {
    const queue = await openMemory()
    const { id } = await queue.submit("echo", { text: "a" })

    const cancelled = await queue.cancel(id)
    const again = await queue.cancel(id).catch((e: unknown) => e)

    expect(cancelled.state).toBe("abandoned")
    expect(cancelled.abandonReason).toBe("cancelled")
    expect(again).toBeInstanceOf(AlreadyTerminal)
  })

  it("a worker of bare async functions runs jobs; wait resolves with the terminal record", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        echo: async (input: { text: string }, ctx: JobContext) => ({
          text: input.text,
          attempt: ctx.attempt,
          jobId: ctx.jobId
        })
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "hi" })

    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(done.state).toBe("succeeded")
    expect(done.result).toEqual({ text: "hi", attempt: 1, jobId: id })
    await worker.stop()
    await worker.stop()
  })

  it("keepAliveMs is the lease the worker holds, renewed while the handler runs", async () => {
    const queue = await openMemory()
    let release: (() => void) | undefined
    // The handler's worst case is 66 s (a 60 s call): without the option the worker would hold 6 s.
    const worker = queue.worker({
      keepAliveMs: 600,
      handlers: {
        echo: async (input: { text: string }) => {
          await new Promise<void>((resolve) => {
            release = resolve
          })
          return input
        }
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "hi" })

    const ahead: Array<number> = []
    const seen = new Set<number>()
    for (let i = 0; i < 500 && (release === undefined || seen.size < 6); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      const job = await queue.get(id)
      if (job.state !== "running" || job.leaseUntil === null) continue
      ahead.push(job.leaseUntil - Date.now())
      seen.add(job.leaseUntil)
    }
    const running = await queue.get(id)
    release?.()
    const done = await queue.wait(id, { timeoutMs: 10_000 })

    // Renewed every 200 ms (six lease ends seen, well past the first lease), never more than the keep-alive ahead,
    // and still the first claim.
    expect(seen.size).toBeGreaterThanOrEqual(6)
    expect(Math.max(...ahead)).toBeLessThanOrEqual(600)
    expect(running.leaseToken).toBe(1)
    expect(done.state).toBe("succeeded")
    expect(await queue.attempts(id)).toHaveLength(1)
  })

  it("a keepAliveMs the core Worker refuses rejects start with ConfigError and claims nothing", async () => {
    const queue = await openMemory()
    const { id } = await queue.submit("echo", { text: "a" })

    for (const keepAliveMs of [2, 2.5, 0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const bad = queue.worker({ handlers: echo, keepAliveMs })
      const error = await bad.start().catch((e: unknown) => e)

      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).message).toMatch(/^worker option keepAliveMs: /)
      expect((error as ConfigError).cause).toMatchObject({ _tag: "InvalidWorkerOptions", option: "keepAliveMs" })
      await bad.stop()
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await queue.get(id)).state).toBe("queued")
    expect(await queue.attempts(id)).toEqual([])

    const good = queue.worker({ handlers: echo, keepAliveMs: 3 })
    await good.start()
    expect((await queue.wait(id, { timeoutMs: 10_000 })).state).toBe("succeeded")
  })

  it("progress reported by a running handler is stored with the next heartbeat", async () => {
    const queue = await openMemory()
    let release: (() => void) | undefined
    const worker = queue.worker({
      handlers: {
        echo: {
          attempt: { timeoutMs: 300 },
          run: async (input: { text: string }, ctx: JobContext) => {
            await ctx.progress(0.5)
            await new Promise<void>((resolve) => {
              release = resolve
            })
            return input
          }
        }
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "hi" })

    let progress: number | null = null
    for (let i = 0; i < 200 && progress !== 0.5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      progress = (await queue.get(id)).progress
    }
    release?.()
    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(progress).toBe(0.5)
    expect(done.state).toBe("succeeded")
  })

  it("watch yields the job until its terminal state, and break stops it", async () => {
    const queue = await openMemory()
    const { id } = await queue.submit("echo", { text: "a" })
    const worker = queue.worker({ handlers: echo })

    const states: Array<string> = []
    await worker.start()
    for await (const job of queue.watch(id)) states.push(job.state)
    const first: Array<string> = []
    for await (const job of queue.watch(id)) {
      first.push(job.state)
      break
    }

    expect(states.at(-1)).toBe("succeeded")
    expect(first).toEqual(["succeeded"])
  })

  it("break out of a watch of a running job releases it: close resolves and no poll keeps the process busy", async () => {
    const queue = await open({ url: "memory:", watchIntervalMs: 20 })
    const { id } = await queue.submit("echo", { text: "a" })

    const seen: Array<string> = []
    for await (const job of queue.watch(id)) {
      seen.push(job.state)
      break
    }
    await queue.close()

    expect(seen).toEqual(["queued"])
    await expect(queue.get(id)).rejects.toBeInstanceOf(ConfigError)
  })

  it("wait rejects with Timeout after timeoutMs and the job goes on", async () => {
    const queue = await openMemory()
    const { id } = await queue.submit("echo", { text: "a" })

    const error = await queue.wait(id, { timeoutMs: 100 }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(Timeout)
    expect((await queue.get(id)).state).toBe("queued")
  })

  it("list filters by state; attempts and charges read the ledgers", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        echo: async (input: { text: string }, ctx: JobContext) =>
          ctx.call(async () => ({ text: input.text, tokens: 7 }), { estimateCents: 4, cost: (r) => r.tokens / 7 })
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "a" })
    await queue.submit("echo", { text: "b" }, { delayMs: 60_000 })
    await queue.wait(id, { timeoutMs: 10_000 })

    const succeeded = await queue.list({ state: "succeeded" })
    const attempts = await queue.attempts(id)
    const charges = await queue.charges(id)

    expect(succeeded.map((j) => j.id)).toEqual([id])
    expect(attempts).toHaveLength(1)
    expect(attempts[0]?.outcome).toBe("succeeded")
    expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[1, true]])
  })

  it("a permanent failure is a dead letter; replay queues it again and it then succeeds", async () => {
    const queue = await openMemory()
    let fail = true
    const worker = queue.worker({
      handlers: {
        echo: async (input: { text: string }) => {
          if (fail) throw Object.assign(new Error("bad request"), { status: 400 })
          return { text: input.text }
        }
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "a" })
    const failed = await queue.wait(id, { timeoutMs: 10_000 })

    const letters = await queue.deadLetters()
    fail = false
    const replayed = await queue.replay({ jobIds: [id] })
    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(failed.state).toBe("failed")
    expect(failed.errorClass).toBe("invalid_request")
    expect(letters.jobs.map((j) => j.id)).toEqual([id])
    expect(replayed.replayed).toEqual([id])
    expect(done.state).toBe("succeeded")
  })

  it("a deadline that has passed refuses the call: abandoned(deadline)", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        echo: async (_input: unknown, ctx: JobContext) => {
          await new Promise((resolve) => setTimeout(resolve, 150))
          return ctx.call(async () => "never", { estimateCents: 1 })
        }
      }
    })
    await worker.start()

    const { id } = await queue.submit("echo", { text: "a" }, { deadline: Date.now() + 100 })
    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(done.state).toBe("abandoned")
    expect(done.abandonReason).toBe("deadline")
  })

  it("open refuses an unknown URL scheme, no backend, and SQS beside the memory store with ConfigError", async () => {
    const unknown = await open({ url: "mysql://localhost/x" }).catch((e: unknown) => e)
    const none = await open({}).catch((e: unknown) => e)
    const sqsOnMemory = await open({ url: "memory:", sqs: { queueUrl: "http://127.0.0.1:1/q" } }).catch(
      (e: unknown) => e
    )

    expect(unknown).toBeInstanceOf(ConfigError)
    expect(none).toBeInstanceOf(ConfigError)
    expect(sqsOnMemory).toBeInstanceOf(ConfigError)
  })

  it("open rejects with StoreUnavailable when the Postgres server cannot be reached", async () => {
    const error = await open({ url: "postgres://postgres@127.0.0.1:1/test" }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(StoreUnavailable)
    expect((error as StoreUnavailable).retryable).toBe(true)
    expect((error as StoreUnavailable).cause).toMatchObject({ _tag: "StoreError", reason: "Connection" })
  })

  it("a worker needs a handler; close is idempotent and a closed queue refuses calls", async () => {
    const queue = await open({ url: "memory:" })

    expect(() => queue.worker({})).toThrow(ConfigError)
    await queue.close()
    await queue.close()
    await expect(queue.submit("echo", {})).rejects.toBeInstanceOf(ConfigError)
  })
})

describe("Queue: provider limits", () => {
  const rateLimited = () => Object.assign(new Error("rate limited"), { status: 429, headers: { "retry-after": "1" } })

  it("a call's resource reaches the fleet limiter: a 429 pauses it and the job waits, its one attempt unused", async () => {
    const queue = await openMemory()
    let calls = 0
    const worker = queue.worker({
      handlers: {
        echo: async (input: { text: string }, ctx: JobContext) =>
          ctx.call(
            async () => {
              calls += 1
              if (calls === 1) throw rateLimited()
              return { text: input.text }
            },
            { estimateCents: 1, resource: "openai:gpt-4.1:key-a", tokens: { input: 10, maxOutput: 20 } }
          )
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "a" }, { maxAttempts: 1 })

    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(done.state).toBe("succeeded")
    expect(calls).toBe(2)
    expect(done.attempts - done.attemptsBase).toBe(1)
    const attempts = await queue.attempts(id)
    expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([
      ["released", "rate_limited"],
      ["succeeded", null]
    ])
    expect(attempts[0]?.evidence).toMatch(
      /^throttled: waiting for openai:gpt-4\.1:key-a \(paused \(rate_limited\)\) until /
    )
    expect(attempts[1]!.startedAt - attempts[0]!.endedAt!).toBeGreaterThanOrEqual(900)
  })

  it("a handler's resource is the resource of its calls that name none", async () => {
    const queue = await openMemory()
    let calls = 0
    const worker = queue.worker({
      handlers: {
        echo: {
          resource: "anthropic:sonnet:key-b",
          run: async (input: { text: string }, ctx: JobContext) =>
            ctx.call(
              async () => {
                calls += 1
                if (calls === 1) throw rateLimited()
                return { text: input.text }
              },
              { estimateCents: 1 }
            )
        }
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "a" }, { maxAttempts: 1 })

    const done = await queue.wait(id, { timeoutMs: 10_000 })

    expect(done.state).toBe("succeeded")
    expect((await queue.attempts(id))[0]?.evidence).toMatch(/waiting for anthropic:sonnet:key-b/)
  })

  it("without a resource a 429 is an ordinary failure that uses the attempt", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        echo: async (_input: { text: string }, ctx: JobContext) =>
          ctx.call(async () => Promise.reject(rateLimited()), { estimateCents: 1 })
      }
    })
    await worker.start()
    const { id } = await queue.submit("echo", { text: "a" }, { maxAttempts: 1 })

    const done = await queue.wait(id, { timeoutMs: 10_000 }).catch(() => queue.get(id))

    expect(done.state).toBe("failed")
    expect(done.errorClass).toBe("rate_limited")
  })
})
