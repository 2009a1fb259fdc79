import { setTimeout } from "node:timers/promises"
import { open } from "@slowcall/promise"

// Your model call goes here. This stand-in answers after 100 ms so the file runs as it is; pass the signal on to
// your SDK (`{ signal }` in the OpenAI or Anthropic request options) and return what the call cost.
const callYourModel = async (text: string, signal: AbortSignal) => {
  await setTimeout(100, undefined, { signal })
  return { summary: text.slice(0, 20), cents: 2 }
}

// Embedded Postgres in this process: nothing to install or start.
const queue = await open({ url: "pglite:memory" })

// A handler is a plain async function. ctx.call wraps the billed call: its spend is recorded even if the
// worker dies mid-call, and its signal aborts on cancel, deadline, lost lease or shutdown.
const worker = queue.worker({
  handlers: {
    summarize: async (input: { text: string }, ctx) =>
      ctx.call((signal) => callYourModel(input.text, signal), { estimateCents: 2, cost: (reply) => reply.cents })
  }
})
await worker.start()

const { id } = await queue.submit("summarize", { text: "Durable jobs for slow, billed model calls." })
const job = await queue.wait(id, { timeoutMs: 30_000 }) // the worker runs the job; this waits for its end
console.log(job.state, job.result, `${job.costCents} cents`)

await queue.close()
