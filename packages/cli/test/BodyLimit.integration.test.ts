/**
 * A body over `serve`'s limit, sent to the real process as stock clients send it: the whole declared body, then the
 * answer read. The `413` must reach the client whatever the size up to the drained bound (a 3 MB body and a 6 MB one
 * alike), so the server may not close the connection while the body is still arriving: `fetch` then sees `EPIPE`,
 * not the status.
 */
import { connect } from "node:net"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { serve, stopAll } from "./processes.js"

afterAll(stopAll)

/** Writes a request declaring `size` bytes, then all of them, and reads until the server closes or answers. */
const sendWhole = (url: string, size: number) =>
  new Promise<{ answer: string; writeError: string | undefined }>((resolve) => {
    const target = new URL(url)
    const socket = connect({ host: target.hostname, port: Number(target.port) })
    let answer = ""
    let writeError: string | undefined
    const finish = () => {
      socket.destroy()
      resolve({ answer, writeError })
    }
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString("latin1")
    })
    socket.on("error", (error: NodeJS.ErrnoException) => {
      writeError ??= error.code ?? error.message
    })
    socket.on("close", finish)
    socket.on("connect", async () => {
      socket.write(
        `POST /v1/jobs HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
          `content-length: ${size}\r\n\r\n`
      )
      const chunk = Buffer.alloc(64 * 1024, 0x20)
      for (let sent = 0; sent < size && !socket.destroyed; sent += chunk.length) {
        if (!socket.write(chunk.subarray(0, Math.min(chunk.length, size - sent)))) {
          await new Promise((resolve) => socket.once("drain", resolve))
        }
      }
      // The whole body is out: the answer is all there is left to read.
      setTimeout(finish, 2_000)
    })
  })

describe("serve: a body over the limit", () => {
  it.each([3, 6, 12])("%i MB with its length: 413, read after the whole body was sent", async (megabytes) => {
    const server = await serve(["--memory", "--port", "0", "--demo"])
    const outcome = await sendWhole(server.url, megabytes * 1024 * 1024)
    expect(outcome.writeError).toBeUndefined()
    expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 /)
    expect(outcome.answer).toContain('{"error":"payload_too_large","limitBytes":1048576}')
    const response = await fetch(`${server.url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "demo.echo", input: { text: "x".repeat(megabytes * 1024 * 1024) } })
    })
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ error: "payload_too_large", limitBytes: 1_048_576 })
    await server.stop()
  })

  it("past the drained bound the connection is cut: the server reads no more than it promised", async () => {
    const server = await serve(["--memory", "--port", "0", "--demo", "--max-body-bytes", "1000"])
    // The bound for a 1,000-byte limit is 8 MiB (`drainBytesFor`); 24 MiB is well past it.
    const outcome = await sendWhole(server.url, 24 * 1024 * 1024)
    expect(outcome.writeError).toBeDefined()
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    await server.stop()
  })
})
