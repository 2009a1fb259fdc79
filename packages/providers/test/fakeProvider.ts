/**
 * A local HTTP server that answers as OpenAI, Anthropic and Gemini document: the test scripts the next reply (a JSON
 * body with a status and headers, a server-sent event stream that may be cut, a connection reset, a stall), points
 * the real SDK at it with `baseURL` (Gemini: `httpOptions.baseUrl`) and `maxRetries: 0`, and reads what the SDK
 * threw or returned. Every request is recorded (method, path, headers, body) so a test can check what the SDK sent.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"

/** What the fake does with the next request. */
export type Reply =
  | {
      readonly kind: "json"
      readonly status: number
      readonly body: unknown
      readonly headers?: Readonly<Record<string, string>>
      /** Answer this long after the request arrived (a model call's latency). */
      readonly delayMs?: number
    }
  | {
      readonly kind: "sse"
      readonly events: ReadonlyArray<string>
      readonly headers?: Readonly<Record<string, string>>
      /** After the events: `end` the stream (default), `cut` the connection, or `hold` it open forever. */
      readonly after?: "end" | "cut" | "hold"
    }
  /** Destroy the socket before any response byte. */
  | { readonly kind: "reset" }
  /** Accept the request and never answer (the client's timeout or abort ends it). */
  | { readonly kind: "stall" }

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: string
  /** When the request arrived, and when its reply was written to the end (wall clock ms; undefined until then). */
  readonly receivedAt: number
  answeredAt: number | undefined
  /** The reply's status. */
  status: number | undefined
}

export interface FakeProvider {
  readonly url: string
  /**
   * Script the reply to every following request until the next `reply`; a function decides per request (given the
   * request and its index among all requests).
   */
  reply(reply: Reply | ((request: Recorded, index: number) => Reply)): void
  readonly requests: ReadonlyArray<Recorded>
  /** The requests whose connection closed before their reply ended: the client aborted, or a `cut` or `reset` reply. */
  readonly closedEarly: ReadonlyArray<Recorded>
  close(): Promise<void>
}

export const startFakeProvider = async (): Promise<FakeProvider> => {
  let next: Reply | ((request: Recorded, index: number) => Reply) = {
    kind: "json",
    status: 500,
    body: { error: { message: "no reply scripted" } }
  }
  const requests: Array<Recorded> = []
  const closedEarly: Array<Recorded> = []
  const sockets = new Set<Socket>()
  const answer = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const recorded: Recorded = {
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      body,
      receivedAt: Date.now(),
      answeredAt: undefined,
      status: undefined
    }
    const index = requests.length
    requests.push(recorded)
    res.on("close", () => {
      if (!res.writableFinished) closedEarly.push(recorded)
    })
    res.on("finish", () => {
      recorded.answeredAt = Date.now()
    })
    const r = typeof next === "function" ? next(recorded, index) : next
    switch (r.kind) {
      case "json": {
        const write = () => {
          recorded.status = r.status
          res.writeHead(r.status, { "content-type": "application/json", ...r.headers })
          res.end(typeof r.body === "string" ? r.body : JSON.stringify(r.body))
        }
        if (r.delayMs === undefined) write()
        else setTimeout(write, r.delayMs)
        return
      }
      case "sse": {
        recorded.status = 200
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...r.headers })
        const payload = r.events.map((e) => `${e}\n\n`).join("")
        if (r.after === "cut") {
          // Drop the connection once the events are handed to the kernel, so the client reads them and then a reset.
          res.write(payload, () => setImmediate(() => res.socket?.destroy()))
        } else if (r.after === "hold") {
          res.write(payload)
        } else {
          res.end(payload)
        }
        return
      }
      case "reset":
        req.socket.destroy()
        return
      case "stall":
        return
    }
  }
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (c: string) => {
      body += c
    })
    req.on("end", () => answer(req, res, body))
  })
  // Idle keep-alive connections stay open until `close`. With Node's 5 s default the server closed them on its own
  // clock, and a client whose event loop had been blocked for longer (a PGlite start between two tests of a loaded
  // machine) sent its next request on a socket the server was closing at that moment: ECONNRESET, a spurious retry.
  server.keepAliveTimeout = 0
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    reply: (r) => {
      next = r
    },
    requests,
    closedEarly,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}

/** A URL on which nothing listens: a port the system gave and took back. */
export const refusedUrl = async (): Promise<string> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}`
}

/** An SSE `data:` line (with an optional `event:` line, as Anthropic sends). */
export const sse = (data: unknown, event?: string): string =>
  `${event === undefined ? "" : `event: ${event}\n`}data: ${typeof data === "string" ? data : JSON.stringify(data)}`
