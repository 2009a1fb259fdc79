/**
 * What the server does with the Node request under a platform request: reading and dropping a body nobody will read,
 * so that the connection stays usable and the client reads the answer instead of a reset.
 *
 * @internal
 */
import { IncomingMessage } from "node:http"
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"

/** The Node request under a platform request, or undefined on another server. @internal */
export const nodeRequest = (request: HttpServerRequest.HttpServerRequest): IncomingMessage | undefined => {
  try {
    const raw: unknown = NodeHttpServerRequest.toIncomingMessage(request)
    return raw instanceof IncomingMessage ? raw : undefined
  } catch {
    return undefined
  }
}

/** Reads and drops what is left of a body, up to `drainBytes`; past that the connection is cut. @internal */
export const dropRest = (message: IncomingMessage, drainBytes: number, cut: () => void): void => {
  message.removeAllListeners("data")
  let drained = 0
  message.on("data", (chunk: Buffer | string) => {
    drained += typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.length
    if (drained > drainBytes) cut()
  })
  message.resume()
}

/**
 * How much of a body nobody reads is read and dropped before the connection is cut after all.
 *
 * @internal
 */
export const drainBytesFor = (maxBodyBytes: number): number =>
  Math.min(64 * 1024 * 1024, Math.max(8 * 1024 * 1024, 16 * maxBodyBytes))
