import * as Client from "@slowcall/core/Client"
import type { JobId } from "@slowcall/core/Job"
import { Effect } from "effect"

export const cancel = (jobId: JobId) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    return yield* client.cancel(jobId).pipe(
      Effect.map((job) =>
        job.state === "abandoned"
          ? "cancelled before it started"
          : "cancel requested: the worker stops at its next heartbeat"
      ),
      Effect.catchTag("AlreadyTerminal", (e) => Effect.succeed(`too late: the job is already ${e.state}`))
    )
  })
