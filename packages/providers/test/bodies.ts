/**
 * Bodies the providers document, for the fake provider: successful responses with usage, stream events, and each
 * provider's error format.
 */
import { sse } from "./fakeProvider.js"

export const openAiChat = (
  over: { model?: string; finish?: string; content?: string | null; refusal?: string } = {}
) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1_700_000_000,
  model: over.model ?? "gpt-4o-2024-08-06",
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: over.content === undefined ? "hi" : over.content,
        refusal: over.refusal ?? null
      },
      finish_reason: over.finish ?? "stop",
      logprobs: null
    }
  ],
  usage: {
    prompt_tokens: 1_000,
    completion_tokens: 200,
    total_tokens: 1_200,
    prompt_tokens_details: { cached_tokens: 400 }
  }
})

export const openAiChatStream = (opts: { usage: boolean; parts?: ReadonlyArray<string> }) => {
  const parts = opts.parts ?? ["Hel", "lo", "!"]
  const base = { id: "chatcmpl-2", object: "chat.completion.chunk", created: 1_700_000_000, model: "gpt-4o-mini" }
  const events = parts.map((p, i) =>
    sse({
      ...base,
      choices: [{ index: 0, delta: i === 0 ? { role: "assistant", content: p } : { content: p }, finish_reason: null }]
    })
  )
  events.push(sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }))
  if (opts.usage) {
    events.push(
      sse({
        ...base,
        choices: [],
        usage: {
          prompt_tokens: 500,
          completion_tokens: 30,
          total_tokens: 530,
          prompt_tokens_details: { cached_tokens: 0 }
        }
      })
    )
  }
  return { events, done: sse("[DONE]") }
}

export const openAiResponse = (status: "completed" | "incomplete" = "completed") => ({
  id: "resp_1",
  object: "response",
  created_at: 1_700_000_000,
  status,
  model: "gpt-4.1-2025-04-14",
  output: [
    {
      type: "message",
      id: "msg_1",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: "hi", annotations: [] }]
    }
  ],
  incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
  usage: {
    input_tokens: 2_000,
    input_tokens_details: { cached_tokens: 1_000 },
    output_tokens: 100,
    output_tokens_details: { reasoning_tokens: 40 },
    total_tokens: 2_100
  }
})

export const openAiResponseStream = () => {
  const r = openAiResponse()
  return [
    sse(
      {
        type: "response.created",
        sequence_number: 0,
        response: { ...r, status: "in_progress", usage: null, output: [] }
      },
      "response.created"
    ),
    sse(
      {
        type: "response.output_text.delta",
        sequence_number: 1,
        item_id: "msg_1",
        output_index: 0,
        content_index: 0,
        delta: "hi"
      },
      "response.output_text.delta"
    ),
    sse({ type: "response.completed", sequence_number: 2, response: r }, "response.completed")
  ]
}

export const openAiError = (
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null
) => ({
  error: { message, type, param, code }
})

export const anthropicMessage = (stop = "end_turn") => ({
  id: "msg_01",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5-20250929",
  content: [{ type: "text", text: "hi" }],
  stop_reason: stop,
  stop_sequence: null,
  usage: { input_tokens: 1_000, cache_creation_input_tokens: 2_000, cache_read_input_tokens: 3_000, output_tokens: 300 }
})

export const anthropicStream = (opts: { end: boolean }) => {
  const events = [
    sse(
      {
        type: "message_start",
        message: {
          ...anthropicMessage(),
          content: [],
          stop_reason: null,
          usage: { input_tokens: 800, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }
        }
      },
      "message_start"
    ),
    sse({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }, "content_block_start"),
    sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } }, "content_block_delta"),
    sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } }, "content_block_delta")
  ]
  if (opts.end) {
    events.push(
      sse({ type: "content_block_stop", index: 0 }, "content_block_stop"),
      sse(
        {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 50 }
        },
        "message_delta"
      ),
      sse({ type: "message_stop" }, "message_stop")
    )
  }
  return events
}

export const anthropicError = (type: string, message: string) => ({ type: "error", error: { type, message } })

export const geminiResponse = (finishReason = "STOP") => ({
  candidates: [{ content: { role: "model", parts: [{ text: "hi" }] }, finishReason, index: 0 }],
  usageMetadata: {
    promptTokenCount: 1_000,
    cachedContentTokenCount: 500,
    candidatesTokenCount: 100,
    thoughtsTokenCount: 50,
    totalTokenCount: 1_150
  },
  modelVersion: "gemini-2.5-flash"
})

export const geminiStream = (opts: { end: boolean }) => {
  const chunk = (text: string, out: number, finishReason?: string) => ({
    candidates: [
      { content: { role: "model", parts: [{ text }] }, index: 0, ...(finishReason ? { finishReason } : {}) }
    ],
    usageMetadata: { promptTokenCount: 600, candidatesTokenCount: out, totalTokenCount: 600 + out },
    modelVersion: "gemini-2.5-flash"
  })
  const events = [sse(chunk("Hel", 5)), sse(chunk("lo", 9))]
  if (opts.end) events.push(sse(chunk("!", 12, "STOP")))
  return events
}

export const geminiError = (code: number, status: string, message: string, details?: ReadonlyArray<unknown>) => ({
  error: { code, message, status, ...(details ? { details } : {}) }
})
