/**
 * No secret reaches a page: whatever a row holds (even evidence written by something that did not redact it), the job
 * view, the job page's detail and the dead-letter list redact it again. Secrets are planted straight into the Store
 * as a worker would write its settlement, then read over HTTP from a live server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
import fc from "fast-check"
import { planted } from "../../core/test/secrets.js"
import { claim, post, settle } from "./contract.js"
import { type Running, start } from "./harness.js"

describe("no secret reaches a page", () => {
  let server: Running
  beforeAll(async () => {
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "redaction"
      }
    )
  })
  afterAll(async () => {
    await server?.close()
  })

  it("property: the view, the detail and the dead letters of a job whose evidence holds a secret never show it", async () => {
    await fc.assert(
      fc.asyncProperty(planted, async (secret) => {
        const created = (await (await post(server.url, "/v1/jobs", { type: "test.work", input: { n: 1 } })).json()) as {
          id: string
        }
        const job = await server.run(claim(created.id))
        await server.run(settle(job, { _tag: "Fail", errorClass: "auth", error: `HTTP 401: ${secret.text}` }))

        const pages = await Promise.all(
          [`/v1/jobs/${created.id}`, `/v1/jobs/${created.id}/detail`, "/v1/dead-letters?limit=5"].map(async (path) => {
            const response = await fetch(`${server.url}${path}`)
            expect(response.status).toBe(200)
            return response.text()
          })
        )
        expect(pages[1]).toContain("HTTP 401")
        for (const page of pages) expect(page, secret.format).not.toContain(secret.body)
      }),
      { numRuns: 80 }
    )
  })
})
