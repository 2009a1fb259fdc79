import { afterEach, describe, expect, it } from "vitest"
import { BatchNotFound, InvalidInput, KeyReused, open, type Queue } from "../src/index.js"

const queues: Array<Queue> = []
const openMemory = async () => {
  const queue = await open({ url: "memory:", queue: "imports", watchIntervalMs: 20 })
  queues.push(queue)
  return queue
}

afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close()
})

const docs = (n: number, fail = -1) =>
  Array.from({ length: n }, (_, i) => ({ type: "doc", input: { n: i, fail: i === fail }, maxAttempts: 1 }))

describe("batches in the Promise API", () => {
  it("submits a batch, follows it to the end with watchBatch, and enqueues its onComplete callback once", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        doc: async (input: { n: number }) => ({ n: input.n }),
        summary: async () => null
      }
    })
    const submitted = await queue.submitBatch(docs(4), {
      key: "import-1",
      onComplete: { type: "summary", input: { note: "done" } }
    })
    expect(submitted).toMatchObject({ created: true, landed: 4 })
    expect(submitted.batch.counts.queued).toBe(4)
    const again = await queue.submitBatch(docs(4), {
      key: "import-1",
      onComplete: { type: "summary", input: { note: "done" } }
    })
    expect(again).toMatchObject({ id: submitted.id, created: false, landed: 0 })

    await worker.start()
    const seen: Array<number> = []
    let last: Awaited<ReturnType<Queue["getBatch"]>> | undefined
    for await (const batch of queue.watchBatch(submitted.id)) {
      seen.push(batch.counts.succeeded)
      last = batch
    }
    expect(last?.finishedAt).not.toBeNull()
    expect(last?.counts).toEqual({ queued: 0, running: 0, succeeded: 4, failed: 0, abandoned: 0 })
    expect(seen.at(-1)).toBe(4)
    const callbackId = last?.onCompleteJobId
    expect(callbackId).toBeTruthy()
    // Enqueued once, in the write that ended the last item, under the key derived from the batch.
    const callback = await queue.get(callbackId!)
    expect(callback.input).toEqual({ batchId: submitted.id, input: { note: "done" } })
    expect(callback.requestKey).toBe(`batch:${submitted.id}:onComplete`)
    expect(await queue.list({ type: "summary", limit: 10 })).toHaveLength(1)
    expect((await queue.getBatch(submitted.id)).counts.succeeded).toBe(4)
    await worker.stop()
  })

  it("refuses a reused key with other items and an invalid item, writing nothing", async () => {
    const queue = await openMemory()
    await queue.submitBatch(docs(2), { key: "import-2" })
    await expect(queue.submitBatch(docs(3), { key: "import-2" })).rejects.toBeInstanceOf(KeyReused)
    const bad = queue.submitBatch([...docs(2), { type: "doc", input: { n: 9 }, priority: 1.5 }])
    await expect(bad).rejects.toBeInstanceOf(InvalidInput)
    expect(await queue.list({ limit: 100 })).toHaveLength(2)
  })

  it("lists, cancels and replays a batch; an unknown id is BatchNotFound", async () => {
    const queue = await openMemory()
    const worker = queue.worker({
      handlers: {
        doc: async (input: { n: number; fail: boolean }) => {
          if (input.fail) throw new Error("bad document")
          return { n: input.n }
        }
      }
    })
    const failing = await queue.submitBatch(docs(3, 1))
    await worker.start()
    for await (const _ of queue.watchBatch(failing.id)) {
      // follow it to the end
    }
    await worker.stop()
    const failedItems = await queue.batchJobs(failing.id, { state: "failed" })
    expect(failedItems.map((job) => job.input)).toEqual([{ n: 1, fail: true }])
    const replayed = await queue.replayBatch(failing.id)
    expect(replayed.replayed.map((job) => job.id)).toEqual([failedItems[0]!.id])
    expect(replayed.batch.counts).toMatchObject({ queued: 1, failed: 0, succeeded: 2 })
    expect(replayed.batch.finishedAt).toBeNull()

    const pending = await queue.submitBatch(docs(3))
    const page = await queue.batchJobs(pending.id, { limit: 2 })
    expect(page.map((job) => (job.input as { n: number }).n)).toEqual([0, 1])
    const rest = await queue.batchJobs(pending.id, { after: page[1]!.id })
    expect(rest.map((job) => (job.input as { n: number }).n)).toEqual([2])
    const cancelled = await queue.cancelBatch(pending.id)
    expect(cancelled.counts).toMatchObject({ queued: 0, abandoned: 3 })
    expect(cancelled.finishedAt).not.toBeNull()

    await expect(queue.getBatch("0190a5b8-7c3d-7e4f-8a1b-2c3d4e5f6a7b")).rejects.toBeInstanceOf(BatchNotFound)
    await expect(queue.getBatch("nope")).rejects.toBeInstanceOf(BatchNotFound)
    await expect(queue.getBatch(pending.id, { tenant: "someone-else" })).rejects.toBeInstanceOf(BatchNotFound)
  })
})
