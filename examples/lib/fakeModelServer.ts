/**
 * A small local stand-in for a model provider's HTTP API, so the SDK examples run the real `openai` and
 * `@anthropic-ai/sdk` clients with no API key and no network beyond 127.0.0.1. It answers one endpoint (the one an
 * example calls) with what `answer` makes of the parsed request body: a JSON reply, or a server-sent event stream.
 * Any other path gets a 404 in the provider's error shape. Every request it answered is kept in `requests`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** A reply: a JSON body (status 200 unless given), or server-sent events written one after another. */
export type Answer =
  | { readonly json: unknown; readonly status?: number }
  | { readonly events: ReadonlyArray<{ readonly event?: string; readonly data: unknown }> }

/** A running fake: its base URL (`http://127.0.0.1:<port>`), the request bodies it answered, and `close`. */
export interface FakeModelServer {
  readonly url: string
  readonly requests: ReadonlyArray<unknown>
  readonly close: () => Promise<void>
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    let text = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => {
      text += chunk
    })
    req.on("end", () => resolve(text))
    req.on("error", reject)
  })

const send = (res: ServerResponse, answer: Answer): void => {
  if ("json" in answer) {
    res.writeHead(answer.status ?? 200, { "content-type": "application/json" })
    res.end(JSON.stringify(answer.json))
    return
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  for (const { event, data } of answer.events) {
    res.write(`${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`)
  }
  res.end()
}

/**
 * Starts the fake on 127.0.0.1 and a port the system picks. `path` is the endpoint answered (for example
 * `/v1/chat/completions`); a POST to it is answered by `answer(body)`.
 */
export const startFakeModelServer = async (
  path: string,
  answer: (body: Record<string, unknown>) => Answer
): Promise<FakeModelServer> => {
  const requests: Array<unknown> = []
  const server = createServer((req, res) => {
    readBody(req).then(
      (text) => {
        if (req.method !== "POST" || req.url?.split("?")[0] !== path) {
          send(res, { status: 404, json: { error: { type: "not_found_error", message: `no route ${req.url}` } } })
          return
        }
        let body: Record<string, unknown>
        try {
          body = JSON.parse(text) as Record<string, unknown>
        } catch {
          send(res, { status: 400, json: { error: { type: "invalid_request_error", message: "body is not JSON" } } })
          return
        }
        requests.push(body)
        send(res, answer(body))
      },
      () => res.destroy()
    )
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
