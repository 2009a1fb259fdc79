import type * as Batch from "@slowcall/core/Batch"
import * as Client from "@slowcall/core/Client"
import { Console, Effect, Stream } from "effect"

// #region submit
/** Import 2,000 documents as one batch: one embedding job per document, one summary job when all are done. */
export const importDocuments = (importId: string, documentIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const { batch, created } = yield* client.submitBatch({
      requestKey: `import:${importId}`,
      tenant: "acme",
      items: documentIds.map((documentId) => ({
        queue: "documents",
        type: "embed",
        input: { documentId },
        maxAttempts: 3
      })),
      budgetCents: 2_500,
      onComplete: { queue: "documents", type: "import.summary", input: { importId } }
    })
    yield* Console.log(created ? `import ${batch.id} submitted` : `import ${batch.id} resumed`)
    return batch.id
  })
// #endregion submit

// #region watch
/** A progress line for every change of the batch's counts, until it finishes. */
export const progress = (batchId: Batch.BatchId) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    yield* client.watchBatch(batchId, { intervalMs: 2_000 }).pipe(
      Stream.runForEach((batch) => {
        const { abandoned, failed, succeeded } = batch.counts
        const done = succeeded + failed + abandoned
        return Console.log(
          `${done}/${batch.size} done (${failed} failed), ${(batch.costCents / 100).toFixed(2)} USD` +
            (batch.finishedAt === null ? "" : " - finished")
        )
      })
    )
  })
// #endregion watch

// #region follow
/** What failed, replay it, or give up on the whole import. */
export const followUp = (batchId: Batch.BatchId, action: "replay" | "cancel") =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const failed = yield* client.batchJobs(batchId, { state: "failed", limit: 20 })
    for (const job of failed) yield* Console.log(`${job.id}: ${job.errorClass} ${job.lastError ?? ""}`)
    if (action === "replay") {
      const { replayed } = yield* client.replayBatch(batchId)
      return `${replayed.length} failed items queued again`
    }
    const batch = yield* client.cancelBatch(batchId)
    return `cancelled: ${batch.counts.abandoned} items abandoned, ${batch.counts.running} stopping`
  })
// #endregion follow
