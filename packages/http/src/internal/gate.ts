/**
 * The gate every request passes before it is routed: the `Host` allow-list (DNS rebinding: a page on another name
 * that resolves to this server's address must not read from it), then the method (a path of the API asked with a
 * method it does not have is `405` with `Allow`, not a `404` as if the path did not exist), then, for
 * state-changing methods, the cross-site check (`Origin` and `Sec-Fetch-Site`) and the media type
 * (`application/json` only, which no HTML form can send). Whatever it refuses was never routed, so it wrote nothing.
 *
 * @internal
 */
import { HttpApi, HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { SlowcallApi } from "../Api.js"
import { ServerOptions } from "./common.js"

/**
 * The host names a server answers for by default: the loopback names, on any port.
 *
 * @internal
 */
export const loopbackHosts: ReadonlyArray<string> = ["localhost", "127.0.0.1", "[::1]"]

/** The host of a `Host` header or an origin's authority, lowercased and without its port; undefined if malformed. */
const hostName = (authority: string): string | undefined => {
  const value = authority.trim().toLowerCase()
  if (value.startsWith("[")) {
    const end = value.indexOf("]")
    if (end < 0) return undefined
    const rest = value.slice(end + 1)
    return rest === "" || /^:\d{1,5}$/.test(rest) ? value.slice(0, end + 1) : undefined
  }
  const match = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(value)
  return match === null ? undefined : match[1]
}

/** Whether a `Host` header is on the allow-list: an entry is a host name (any port) or `name:port`. */
const hostAllowed = (host: string | undefined, allowed: ReadonlyArray<string> | "*"): boolean => {
  if (allowed === "*") return true
  if (host === undefined) return false
  const name = hostName(host)
  if (name === undefined) return false
  const exact = host.trim().toLowerCase()
  return allowed.some((entry) => {
    const wanted = entry.toLowerCase()
    return wanted === name || wanted === exact
  })
}

const unsafeMethods = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** A path of the API (`/v1/jobs/:id`) as a pattern that matches one request path; a parameter is one segment. */
const pathPattern = (path: string): RegExp =>
  new RegExp(
    `^${path
      .split("/")
      .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
      .join("/")}$`
  )

/** Every path of the API with the methods it has, read from the API; a path with GET also answers HEAD. */
const routes: ReadonlyArray<{ readonly pattern: RegExp; readonly methods: ReadonlySet<string> }> = (() => {
  const byPath = new Map<string, Set<string>>()
  HttpApi.reflect(SlowcallApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const methods = byPath.get(endpoint.path) ?? new Set<string>()
      methods.add(endpoint.method)
      if (endpoint.method === "GET") methods.add("HEAD")
      byPath.set(endpoint.path, methods)
    }
  })
  return [...byPath].map(([path, methods]) => ({ pattern: pathPattern(path), methods }))
})()

/**
 * The methods the request's path has when it has not the request's own: undefined when the method is right or the
 * path is none of the API's (a `404` then, from the router).
 */
const otherMethods = (method: string, url: string): ReadonlyArray<string> | undefined => {
  const path = url.split("?")[0] ?? url
  const allowed = new Set<string>()
  for (const route of routes) {
    if (!route.pattern.test(path)) continue
    if (route.methods.has(method)) return undefined
    for (const other of route.methods) allowed.add(other)
  }
  return allowed.size === 0 ? undefined : [...allowed].sort()
}

/** Whether the request says it comes from another site: its `Origin` is not this server nor an allowed origin. */
const crossSite = (request: HttpServerRequest.HttpServerRequest, allowedOrigins: ReadonlyArray<string>): boolean => {
  const origin = request.headers.origin
  if (origin !== undefined) {
    if (allowedOrigins.includes(origin.toLowerCase().replace(/\/$/, ""))) return false
    let authority: string
    try {
      const url = new URL(origin)
      if (url.protocol !== "http:" && url.protocol !== "https:") return true
      authority = url.host
    } catch {
      // `null` (sandboxed frames, file: pages, some redirects) and anything else that is not an origin.
      return true
    }
    return authority.toLowerCase() !== (request.headers.host ?? "").trim().toLowerCase()
  }
  // Without an Origin (browsers always send one on cross-origin writes), the fetch metadata still tells.
  const site = request.headers["sec-fetch-site"]
  return site !== undefined && site !== "same-origin" && site !== "none"
}

/** `application/json`, with at most a UTF-8 charset. */
const isJson = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type, ...params] = contentType.split(";").map((part) => part.trim().toLowerCase())
  if (type !== "application/json") return false
  return params.every((param) => param === "" || param === "charset=utf-8" || param === 'charset="utf-8"')
}

const refuse = (status: number, error: string, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.unsafeJson({ error }, { status, headers: { "cache-control": "no-store", ...headers } })

/**
 * The gate, as API-level middleware over every route.
 *
 * @internal
 */
export const gate = HttpApiBuilder.middleware(
  SlowcallApi,
  Effect.map(
    ServerOptions,
    (options) => (app) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (!hostAllowed(request.headers.host, options.allowedHosts)) return refuse(421, "host_not_allowed")
        const allow = otherMethods(request.method, request.url)
        if (allow !== undefined) return refuse(405, "method_not_allowed", { allow: allow.join(", ") })
        if (unsafeMethods.has(request.method)) {
          if (crossSite(request, options.allowedOrigins)) return refuse(403, "cross_site_request")
          if (!isJson(request.headers["content-type"])) return refuse(415, "unsupported_media_type")
        }
        return yield* app
      })
  )
)
