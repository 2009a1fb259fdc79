/**
 * The middleware of `Api.ts`: authentication, the JSON body gate, and the API-wide rewrite of the platform's
 * decoding failures into the API's `400` body. Each runs before the handler, so a request any of them rejects
 * writes nothing.
 *
 * @internal
 */
import {
  HttpApiBuilder,
  HttpApiError,
  type HttpApp,
  HttpIncomingMessage,
  type HttpServerError,
  HttpServerRequest
} from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Authentication, headerNames, type Issue, JsonBody, SlowcallApi } from "../Api.js"
import { invalidRequest, respondWith, ServerOptions } from "./common.js"

/**
 * `Authentication`: the tenant `authenticate` resolves, `undefined` when the server runs without it.
 *
 * @internal
 */
export const authentication = Layer.effect(
  Authentication,
  Effect.map(ServerOptions, ({ authenticate }) =>
    Effect.gen(function* () {
      if (authenticate === undefined) return undefined
      const request = yield* HttpServerRequest.HttpServerRequest
      const tenant = yield* authenticate(request.headers.authorization)
      if (Option.isSome(tenant)) return tenant.value
      yield* respondWith({ headers: { "www-authenticate": "Bearer" } })
      return yield* Effect.fail({ error: "unauthorized" } as const)
    })
  )
)

/** Node's request reader fails with this cause when a body passes the size limit it was given. */
const isSizeLimit = (error: HttpServerError.RequestError): boolean =>
  error.cause instanceof Error && error.cause.message === "maxBytes exceeded"

/**
 * `JsonBody`: reads the body once under the size limit (the platform keeps the text for the payload decoding that
 * follows) and checks that it is JSON.
 *
 * @internal
 */
export const jsonBody = Layer.effect(
  JsonBody,
  Effect.map(ServerOptions, ({ maxBodyBytes }) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const tooLarge = { error: "payload_too_large", limitBytes: maxBodyBytes } as const
      const declared = Number(request.headers["content-length"] ?? "0")
      if (Number.isFinite(declared) && declared > maxBodyBytes) return yield* Effect.fail(tooLarge)
      const text = yield* request.text.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
        Effect.catchTag("RequestError", (error) =>
          Effect.fail(
            isSizeLimit(error) ? tooLarge : invalidRequest([{ path: [], message: "the body could not be read" }])
          )
        )
      )
      if (text.trim() === "") {
        return yield* Effect.fail(invalidRequest([{ path: [], message: "a JSON body is required" }]))
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
    return index === 0 && typeof name === "string" ? (headerNames[name] ?? name) : name
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
