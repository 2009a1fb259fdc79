/**
 * The middleware of `Api.ts`: authentication, the JSON body gate, and the API-wide rewrite of the platform's
 * decoding failures into the API's `400` body. Each runs before the handler, so a request any of them rejects
 * writes nothing.
 *
 * @internal
 */

import type { IncomingMessage } from "node:http"
import {
  HttpApiBuilder,
  HttpApiError,
  type HttpApp,
  HttpIncomingMessage,
  type HttpServerError,
  HttpServerRequest
} from "@effect/platform"
import * as Canonical from "@slowcall/core/Canonical"
import { Effect, Layer, Option } from "effect"
import { Authentication, headerNames, type Issue, JsonBody, SlowcallApi } from "../Api.js"
import { invalidRequest, respondWith, ServerOptions } from "./common.js"
import { drainBytesFor, dropRest, nodeRequest } from "./node.js"

/**
 * `Authentication`: the tenant `authenticate` resolves, `undefined` when the server runs without it (or for a public
 * `/metrics`). The bearer scheme is what the document declares; `authenticate` is given the whole `Authorization`
 * header, as `Server.Options` promises, so the token the platform extracted is not used.
 *
 * @internal
 */
export const authentication = Layer.effect(
  Authentication,
  Effect.map(ServerOptions, ({ authenticate, metrics }) => ({
    bearer: () =>
      Effect.gen(function* () {
        if (authenticate === undefined) return undefined
        const request = yield* HttpServerRequest.HttpServerRequest
        // A public `/metrics` is the one endpoint with authentication that needs no credentials: it shows everyone's.
        if (metrics === "public" && request.url.split("?")[0] === "/metrics") return undefined
        const tenant = yield* authenticate(request.headers.authorization)
        if (Option.isSome(tenant)) return tenant.value
        yield* respondWith({ headers: { "www-authenticate": "Bearer" } })
        return yield* Effect.fail({ error: "unauthorized" } as const)
      })
  }))
)

/** Node's request reader fails with this cause when a body passes the size limit it was given. */
const isSizeLimit = (error: HttpServerError.RequestError): boolean =>
  error.cause instanceof Error && error.cause.message === "maxBytes exceeded"

/**
 * The deepest a body may nest: the input's limit (`Canonical.maxDepth`), the body object around it, and one level
 * more, so that input just past its limit is refused by the input's own check, which names where. Checked on the
 * text, in one loop, before `JSON.parse` or any walk of the value sees it.
 */
const maxBodyDepth = Canonical.maxDepth + 2

/** The deepest nesting of `[` and `{` in JSON text, outside strings; one pass, no recursion. */
const nestingDepth = (text: string): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      depth++
      if (depth > deepest) deepest = depth
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return deepest
}

/**
 * Node's request reader destroys the request (and with it the socket) when it gives up at the size limit, so the
 * client, still sending, sees a reset instead of the `413`. On a Node request this makes that destroy read and drop
 * the rest of the body instead (up to `drainBytes`, then the connection is cut after all), so the `413` is read.
 * A request on another server, or one whose body was read to its end, is left alone.
 */
const dropInsteadOfReset = (message: IncomingMessage, drainBytes: number): void => {
  const destroy = message.destroy.bind(message)
  message.destroy = ((error?: Error) => {
    if (message.complete) return destroy(error)
    dropRest(message, drainBytes, () => destroy())
    return message
  }) as typeof message.destroy
}

/**
 * `JsonBody`: reads the body once under the size limit (the platform keeps the text for the payload decoding that
 * follows; over the limit, with or without `Content-Length`, `413` and the rest of the body is dropped so the client
 * reads the answer), and checks that it is JSON nested no deeper than the input's limit allows.
 *
 * @internal
 */
export const jsonBody = Layer.effect(
  JsonBody,
  Effect.map(ServerOptions, ({ maxBodyBytes }) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      // No `Connection: close`: Node would close the socket as soon as the answer is written, under a client still
      // sending its body (fetch then reports EPIPE, not the 413). The connection stays open while the rest of the
      // body is read and dropped (bounded by `drainBytes`), and stays usable after it.
      const tooLarge: Effect.Effect<never, { readonly error: "payload_too_large"; readonly limitBytes: number }> =
        Effect.fail({ error: "payload_too_large", limitBytes: maxBodyBytes } as const)
      const message = nodeRequest(request)
      const drainBytes = drainBytesFor(maxBodyBytes)
      if (message !== undefined) dropInsteadOfReset(message, drainBytes)
      const declared = Number(request.headers["content-length"] ?? "0")
      if (Number.isFinite(declared) && declared > maxBodyBytes) {
        // The body is never read: it is dropped as it arrives, so the client can finish sending and read the 413.
        if (message !== undefined) dropRest(message, drainBytes, () => message.destroy())
        return yield* tooLarge
      }
      const text = yield* request.text.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
        Effect.catchTag(
          "RequestError",
          (error): Effect.Effect<never, ReturnType<typeof invalidRequest> | Effect.Effect.Error<typeof tooLarge>> =>
            isSizeLimit(error)
              ? tooLarge
              : Effect.fail(invalidRequest([{ path: [], message: "the body could not be read" }]))
        )
      )
      if (text.trim() === "") {
        return yield* Effect.fail(invalidRequest([{ path: [], message: "a JSON body is required" }]))
      }
      if (nestingDepth(text) > maxBodyDepth) {
        return yield* Effect.fail(
          invalidRequest([{ path: [], message: `the body is nested deeper than ${maxBodyDepth} levels` }])
        )
      }
      const parsed = Option.liftThrowable(JSON.parse)(text)
      if (Option.isNone(parsed)) {
        return yield* Effect.fail(invalidRequest([{ path: [], message: "the body is not valid JSON" }]))
      }
    })
  )
)

/** A decoding issue as the API reports it: header names in their usual spelling, symbols as strings. */
const issueOf = (issue: HttpApiError.HttpApiDecodeError["issues"][number]): Issue => ({
  path: issue.path.map((segment, index) => {
    const name = typeof segment === "symbol" ? String(segment) : segment
    // Own keys only: a body key such as `toString` or `__proto__` must not find Object.prototype's members.
    return index === 0 && typeof name === "string" && Object.hasOwn(headerNames, name) ? headerNames[name]! : name
  }),
  message: issue.message
})

type ApiError = HttpApiError.HttpApiDecodeError | ReturnType<typeof invalidRequest>

const isDecodeError = (error: ApiError): error is HttpApiError.HttpApiDecodeError =>
  error instanceof HttpApiError.HttpApiDecodeError

/**
 * Every request that does not decode (path, query, headers or body) answers the API's `400` body,
 * `{ error: "invalid_request", issues }`, instead of the platform's own shape.
 *
 * @internal
 */
export const invalidRequests: Layer.Layer<never> = HttpApiBuilder.middleware(SlowcallApi, (app) =>
  // The platform types the routed app as infallible; its failures are the endpoints' typed errors, and only the
  // decoding failure is rewritten here.
  Effect.catchIf(app as HttpApp.Default<ApiError>, isDecodeError, (error) =>
    Effect.fail(invalidRequest(error.issues.map(issueOf)))
  )
)
