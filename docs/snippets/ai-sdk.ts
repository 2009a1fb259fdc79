import { createOpenAI } from "@ai-sdk/openai"
import { open } from "@slowcall/promise"
import { withAiSdk } from "@slowcall/providers"
import * as ai from "ai"

// An OpenAI provider answered in this process, with the usage a real reply carries, so the file runs as it is.
// Drop `fetch` (and set OPENAI_API_KEY) to call OpenAI.
const reply = {
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1_764_633_600,
  model: "gpt-4o-mini-2024-07-18",
  choices: [{ index: 0, message: { role: "assistant", content: "Bonjour" }, finish_reason: "stop" }],
  usage: {
    prompt_tokens: 1_200,
    completion_tokens: 300,
    total_tokens: 1_500,
    prompt_tokens_details: { cached_tokens: 200 }
  }
}
const openai = createOpenAI({
  apiKey: process.env.OPENAI_API_KEY ?? "sk-local",
  fetch: async () => Response.json(reply)
})

const queue = await open({ url: "memory:" })
const worker = queue.worker({
  handlers: {
    translate: async (input: { text: string }, ctx) => {
      // Each AI SDK call is one billed call of the job: the estimate reserved first, the job's signal passed as
      // abortSignal, the cost settled from the usage, the resource (openai:gpt-4o-mini:key-a) named for the limiter.
      const llm = withAiSdk(ai, ctx, { credential: "key-a" })
      const { text } = await llm.generateText({
        model: openai.chat("gpt-4o-mini"),
        prompt: `Say this in French: ${input.text}`,
        maxOutputTokens: 400
      })
      return { text }
    }
  }
})
await worker.start()

const { id } = await queue.submit("translate", { text: "Hello" })
const job = await queue.wait(id, { timeoutMs: 30_000 })
// 1,000 input x 15 + 200 cached x 7.5 + 300 output x 60 cents per million tokens (gpt-4o-mini's list price)
console.log(job.state, job.result, `${job.costCents} cents`)

await queue.close()
