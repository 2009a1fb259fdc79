import { open } from "@slowcall/promise"

// Embedded Postgres in this process: nothing to install or start.
const queue = await open({ url: "pglite:memory" })

// A handler is a plain async function. ctx.call wraps the billed call: its spend is recorded even if the
// worker dies mid-call, and ctx.signal aborts on cancel, deadline, lost lease or shutdown.
const worker = queue.worker({
  handlers: {
    summarize: async (input: { text: string }, ctx) =>
      // Pass the signal on to your SDK call (e.g. `{ signal }` in the OpenAI or Anthropic client options).
      ctx.call(async (_signal) => ({ summary: input.text.slice(0, 20) }), { estimateCents: 2 })
  }
})
await worker.start()

const { id } = await queue.submit("summarize", { text: "Durable jobs for slow, billed model calls." })
const job = await queue.wait(id, { timeoutMs: 30_000 })
console.log(job.state, job.result, `${job.costCents} cents`)

await queue.close()
