/**
 * A method a path does not have answers `405 method_not_allowed` with `Allow`, for every path of the API as its
 * own document lists them, whatever the request's media type: not `404` (the path exists) and not `415` (the media
 * type is not what is wrong). A path the API does not have stays `404`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
import { type Running, start } from "./harness.js"

const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
const someId = "0190a4a8-4a3b-7c2d-8e9f-0a1b2c3d4e5f"

describe("a method the path does not have", () => {
  let server: Running
  let paths: Array<{ readonly path: string; readonly allowed: ReadonlyArray<string> }> = []

  beforeAll(async () => {
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
    )
    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    paths = Object.entries(document.paths).map(([path, item]) => {
      const own = Object.keys(item).map((method) => method.toUpperCase())
      return {
        path: path.replace("{id}", someId).replace("{resource}", "openai:gpt-4.1:key-a"),
        allowed: [...own, ...(own.includes("GET") ? ["HEAD"] : [])].sort()
      }
    })
  })
  afterAll(() => server?.close())

  it("answers 405 with Allow and the API's JSON error, with or without a JSON body", async () => {
    // Arrange
    expect(paths.length).toBeGreaterThanOrEqual(10)
    let checked = 0
    for (const { path, allowed } of paths) {
      for (const method of methods.filter((m) => !allowed.includes(m))) {
        for (const headers of [{}, { "content-type": "application/json" }]) {
          // Act
          const response = await fetch(`${server.url}${path}`, {
            method,
            headers,
            ...(method === "GET" || method === "HEAD" ? {} : { body: "{}" })
          })

          // Assert
          const what = `${method} ${path} ${JSON.stringify(headers)}`
          expect(response.status, what).toBe(405)
          expect(response.headers.get("allow"), what).toBe(allowed.join(", "))
          expect(response.headers.get("content-type"), what).toMatch(/^application\/json/)
          // A HEAD answer has no body, by definition.
          if (method !== "HEAD") expect(await response.json(), what).toEqual({ error: "method_not_allowed" })
          checked++
        }
      }
    }
    expect(checked).toBeGreaterThan(50)
  })

  it("leaves the methods a path has, and paths the API does not have, alone", async () => {
    expect((await fetch(`${server.url}/v1/jobs`)).status).toBe(200)
    expect((await fetch(`${server.url}/v1/jobs`, { method: "HEAD" })).status).toBe(200)
    expect((await fetch(`${server.url}/v1/jobs/${someId}`)).status).toBe(404)
    expect((await fetch(`${server.url}/v1/nothing-here`, { method: "DELETE" })).status).not.toBe(405)
    expect((await fetch(`${server.url}/v1/nothing-here`)).status).toBe(404)
  })
})
