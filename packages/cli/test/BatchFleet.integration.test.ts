/**
 * Acceptance of batches: four worker processes on the machine's Postgres (then Redis) run one batch of 2,000 items
 * with an `onComplete` callback; one worker is SIGKILLed while it holds running items. At the end every item is
 * terminal, the batch's kept counts equal its items' states, its cost equals the sum of its items' ledgers (their
 * charges), and the callback was enqueued once (one `report` job in the queue, the one the batch names) and ran once
 * (one line in the file its handler appends to, from whichever process ran it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { type JobRecord, open, type Queue } from "@slowcall/promise"
import { afterAll, describe, expect, it } from "vitest"
import { DATABASE_URL, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "../../adapter-redis/test/support.js"
import { type Running, repoRoot, start, stopAll, waitFor } from "./processes.js"

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const script = join(repoRoot, "packages/cli/test/fixtures/batch-worker.ts")
const ITEMS = 2_000
const WORKERS = 4
const KILLED = "batch-0"

afterAll(stopAll)

const until = async <A>(read: () => Promise<A>, done: (value: A) => boolean, what: string, timeoutMs = 75_000) => {
  const end = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > end) throw new Error(`waited for ${what}; last ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Every 97th item has one attempt (and fails on it): nothing takes it over after a kill. */
const oneAttempt = (job: JobRecord) => (job.input as { n: number }).n % 97 === 0

/** Every item of the batch, in landing order, read page by page. */
const itemsOf = async (queue: Queue, batchId: string) => {
  const all: Array<JobRecord> = []
  for (;;) {
    const after = all.at(-1)?.id
    const page = await queue.batchJobs(batchId, { limit: 500, ...(after === undefined ? {} : { after }) })
    all.push(...page)
    if (page.length < 500) return all
  }
}

const fleet = (backend: { readonly url: string; readonly schema: string }) => async () => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-batch-fleet-"))
  const log = join(dir, "reports.jsonl")
  writeFileSync(log, "")
  const workers: Array<Running> = []
  let queue: Queue | undefined
  try {
    // The test's own queue migrates the schema before any worker starts.
    queue = await open({ url: backend.url, schema: backend.schema, queue: "batch" })
    for (let i = 0; i < WORKERS; i++) {
      workers.push(
        start(["--import", tsx, script], {
          BATCH_URL: backend.url,
          BATCH_SCHEMA: backend.schema,
          BATCH_WORKER_ID: `batch-${i}`,
          BATCH_REPORT_LOG: log
        })
      )
    }
    for (const worker of workers) await waitFor(worker, ({ stdout }) => stdout.includes("ready"), "a worker to start")

    const submitted = await queue.submitBatch(
      Array.from({ length: ITEMS }, (_, n) => ({
        type: "item",
        input: { n },
        // The items meant to fail fail on their one attempt; the others may be taken over after the kill.
        maxAttempts: n % 97 === 0 ? 1 : 3
      })),
      { key: `import-${backend.schema}`, onComplete: { type: "report", input: { source: "acceptance" } } }
    )
    expect(submitted.batch.added).toBe(ITEMS)
    const batchId = submitted.id

    // Mid-run: a tenth of the items ended, and the worker to kill holds running items (before half have ended).
    await until(
      () => queue!.getBatch(batchId),
      (b) => b.counts.succeeded + b.counts.failed >= ITEMS / 10,
      "a tenth of the batch"
    )
    const held = await until(
      async () => {
        const all = await queue!.list({ state: "running", limit: 100 })
        const running = all.filter((job) => job.leaseOwner?.startsWith(`${KILLED}/`))
        if (running.some((job) => !oneAttempt(job))) return running
        const b = await queue!.getBatch(batchId)
        if (b.counts.succeeded + b.counts.failed > ITEMS / 2) {
          throw new Error(
            `half the batch ended before ${KILLED} was seen holding an item: ${JSON.stringify(b.counts)}; ` +
              `running items held by ${JSON.stringify(all.map((j) => j.leaseOwner))}; ${KILLED} printed:\n${workers[0]!.stdout()}\n${workers[0]!.stderr()}`
          )
        }
        return running
      },
      (running) => running.some((job) => !oneAttempt(job)),
      `${KILLED} to hold running items with attempts left`
    )
    workers[0]!.child.kill("SIGKILL")
    expect(await workers[0]!.exited).toBe("SIGKILL")

    const finished = await until(
      () => queue!.getBatch(batchId),
      (b) => b.finishedAt !== null,
      "the batch to finish"
    )
    const callbackId = finished.onCompleteJobId
    expect(callbackId).not.toBeNull()
    const callback = await queue.wait(callbackId!, { timeoutMs: 30_000 })
    expect(callback.state).toBe("succeeded")
    expect(callback.requestKey).toBe(`batch:${batchId}:onComplete`)

    // Every item terminal, and the kept counts are the items' states.
    const items = await itemsOf(queue, batchId)
    expect(items).toHaveLength(ITEMS)
    const counts = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
    for (const item of items) counts[item.state]++
    expect(counts.queued + counts.running).toBe(0)
    expect(counts.failed).toBe(Math.ceil(ITEMS / 97))
    const batch = await queue.getBatch(batchId)
    expect(batch.counts).toEqual(counts)
    expect(batch.size).toBe(ITEMS)

    // The batch's cost is the sum of its items' ledgers: their charges, and each record's cost.
    let charged = 0
    for (const item of items) {
      for (const charge of await queue.charges(item.id)) charged += charge.amountCents
    }
    expect(batch.costCents).toBe(charged)
    expect(batch.costCents).toBe(items.reduce((sum, item) => sum + item.costCents, 0))
    expect(charged).toBeGreaterThanOrEqual(items.reduce((sum, item) => sum + 1 + ((item.input as any).n % 3), 0))

    // The kill was mid-run: items it held (read just before the kill; one may have ended in between) have their
    // attempt there ended `expired`. An item with attempts left was taken over and ended on another worker; an item of
    // one attempt (every 97th) has none left, so it ended `failed` with that expired attempt as its only one.
    let takenOver = 0
    for (const job of held) {
      const attempts = await queue.attempts(job.id)
      if (!attempts.some((a) => a.worker.startsWith(`${KILLED}/`) && a.outcome === "expired")) continue
      if (oneAttempt(job)) {
        expect(attempts).toHaveLength(1)
        expect((await queue.get(job.id)).state).toBe("failed")
        continue
      }
      takenOver++
      expect(attempts.at(-1)!.worker.startsWith(`${KILLED}/`)).toBe(false)
      expect(["succeeded", "failed"]).toContain((await queue.get(job.id)).state)
    }
    expect(takenOver).toBeGreaterThan(0)

    // The callback: one job enqueued (the one the batch names), run once.
    const reports = await queue.list({ type: "report", limit: 10 })
    expect(reports.map((job) => job.id)).toEqual([callbackId])
    const runs = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line))
    expect(runs).toHaveLength(1)
    expect(runs[0]).toMatchObject({ jobId: callbackId, batchId })
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()))
    await queue?.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("a batch of 2,000 items across four worker processes, one killed mid-run", () => {
  const schema = uniqueSchema("batch_fleet")
  const prefix = uniquePrefix("batch-fleet")
  afterAll(async () => {
    await dropSchema(schema)
    await dropPrefix(REDIS_URL, prefix)
  })

  it(
    "on Postgres: every item terminal, counts and cost as the items', the callback enqueued and run once",
    fleet({ url: DATABASE_URL, schema }),
    120_000
  )

  it(
    "on Redis: every item terminal, counts and cost as the items', the callback enqueued and run once",
    fleet({ url: REDIS_URL, schema: prefix }),
    120_000
  )
})
