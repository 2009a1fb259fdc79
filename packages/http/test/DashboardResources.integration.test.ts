/**
 * The dashboard's resource view in a real browser (Debian's Chromium through playwright-core): each resource's
 * limits, bucket levels (debt in red), permits in use against the cap (and the cap learned from a 429 beside it),
 * the pause with its kind, end and reason, and the 429s and waits the store counted, refreshed live as workers'
 * Limiter calls change them. Resume lifts a spend cap's pause for every worker with one JSON `POST`; a form post from
 * another site to the same endpoint is refused and changes nothing; with tokens, a tenant that is not an operator is
 * told so and the pause stays. Screenshots go to test-output/dashboard/.
 */
import { createServer, type Server as NodeServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import { Effect, Either } from "effect"
import type { Browser, Page } from "playwright-core"
import * as Auth from "../src/Auth.js"
import { memoryBackend, openDashboard, poll, shots } from "./browser.js"
import { type Running, start } from "./harness.js"

const openai = "openai:gpt-4.1:org/key-a"
const anthropic = "anthropic:sonnet:key-b"

const apply = (items: ReadonlyArray<Limiter.LimitItem>) =>
  Effect.flatMap(Limiter.Limiter, (limiter) => limiter.apply({ items }))

const stateOf = (resource: string) =>
  Effect.flatMap(Limiter.Limiter, (limiter) => limiter.read({ resources: [resource] })).pipe(
    Effect.map((read) => read.resources[0]!)
  )

const row = (page: Page, resource: string) => page.locator(`tr.resource[data-resource="${resource}"]`)

describe("dashboard: the resource view in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page
  let close = async () => {}

  beforeAll(async () => {
    ;({ server, browser, page, close } = await openDashboard({ queue: "resources" }))
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        limiter.define({
          items: [
            {
              resource: openai,
              limits: { maxConcurrent: 2, requestsPerMinute: 600, outputTokensPerMinute: 600, burstSeconds: 1 }
            },
            { resource: anthropic, limits: { requestsPerMinute: 50 } }
          ]
        })
      )
    )
  })
  afterAll(() => close())

  it("says so when there is no resource yet", async () => {
    const empty = await start(memoryBackend())
    const view = await browser.newPage()
    try {
      await view.goto(`${empty.url}/#/resources`)
      await view.locator("#no-resources").waitFor()
      await expect.poll(() => view.textContent("#conn"), poll).toBe("live")
      expect(await view.locator("#nav-resources").getAttribute("aria-current")).toBe("page")
    } finally {
      await view.close()
      await empty.close()
    }
  })

  it("shows limits, levels, permits in use, pauses and the 429s seen, live; Resume lifts a spend cap", async () => {
    await page.goto(`${server.url}/#/resources`)
    await row(page, openai).waitFor()
    expect(await row(page, openai).locator("td").nth(1).textContent()).toBe(
      "2 at once, 600 requests/min, 600 output tok/min, burst 1 s"
    )
    expect(await row(page, openai).locator("td.permits").textContent()).toBe("0 / 2")
    expect(await row(page, openai).locator('td[data-dimension="requests"]').textContent()).toBe("10 / 10")
    expect(await row(page, openai).locator('td[data-dimension="inputTokens"]').textContent()).toBe("—")
    expect(await row(page, openai).locator("button.resume").count()).toBe(0)

    // Workers call: a permit held with a large output reservation (debt), another, a third told to wait (the cap),
    // then a 429 with a reset on one resource and a spend cap's on the other.
    await server.run(
      apply([
        {
          _tag: "Acquire",
          resource: openai,
          callId: "c1",
          holder: { jobId: "j1", token: 1 },
          leaseMs: 60_000,
          cost: { outputTokens: 400 }
        },
        { _tag: "Acquire", resource: openai, callId: "c2", holder: { jobId: "j2", token: 1 }, leaseMs: 60_000 },
        { _tag: "Acquire", resource: openai, callId: "c4", holder: { jobId: "j4", token: 1 }, leaseMs: 60_000 },
        {
          _tag: "Pause",
          resource: anthropic,
          kind: "quota_exhausted",
          until: null,
          reason: "enforced_spend_limit_reached"
        },
        {
          _tag: "Pause",
          resource: openai,
          kind: "rate_limited",
          until: Date.now() + 3_600_000,
          reason: "429 retry-after"
        }
      ])
    )
    await expect.poll(() => row(page, openai).locator("td.permits").textContent(), poll).toBe("2 / 2")
    const debt = row(page, openai).locator('td[data-dimension="outputTokens"]')
    expect(Number(await debt.getAttribute("data-level"))).toBeLessThan(0)
    expect(await debt.locator(".bar.debt").count()).toBe(1)
    expect(await row(page, openai).locator("td.throttled").textContent()).toBe("1")
    await expect.poll(() => row(page, anthropic).getAttribute("data-paused"), poll).toBe("quota_exhausted")
    expect(await row(page, anthropic).locator(".pause-cell").textContent()).toContain("spend cap")
    expect(await row(page, anthropic).locator(".pause-cell").textContent()).toContain("until resumed")
    expect(await row(page, anthropic).locator(".pause-cell").textContent()).toContain("enforced_spend_limit_reached")
    expect(await row(page, anthropic).locator("td.seen-429").textContent()).toBe("1")
    expect(await row(page, openai).getAttribute("data-paused")).toBe("rate_limited")
    await page.screenshot({ path: `${shots}resources.png`, fullPage: true })

    // Resume: one POST, for every worker; the next Acquire is granted.
    await row(page, anthropic)
      .getByRole("button", { name: `Resume ${anthropic}` })
      .click()
    await expect
      .poll(() => page.textContent("#resource-status"))
      .toBe(`Resumed ${anthropic}: every worker may call it again.`)
    await expect.poll(() => row(page, anthropic).getAttribute("data-paused"), poll).toBe("")
    expect(await row(page, anthropic).locator("button.resume").count()).toBe(0)
    expect((await server.run(stateOf(anthropic))).pause).toBeNull()
    const granted = await server.run(
      apply([{ _tag: "Acquire", resource: anthropic, callId: "c3", holder: { jobId: "j3", token: 1 }, leaseMs: 1_000 }])
    )
    expect(granted.results[0]!._tag).toBe("Granted")
    // The other pause is untouched.
    expect((await server.run(stateOf(openai))).pause?.kind).toBe("rate_limited")
    await page.screenshot({ path: `${shots}resources-resumed.png`, fullPage: true })
  })

  it("shows the cap the fleet learned from a 429 beside the declared one, live", async () => {
    const google = "google:gemini-2.5:key-c"
    const holder = (jobId: string) => ({ jobId, token: 1 })
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        limiter.define({ items: [{ resource: google, limits: { maxConcurrent: 4 } }] })
      )
    )
    await server.run(
      apply(
        ["g1", "g2", "g3"].map((id) => ({
          _tag: "Acquire",
          resource: google,
          callId: id,
          holder: holder(id),
          leaseMs: 60_000
        }))
      )
    )
    await page.goto(`${server.url}/#/resources`)
    await expect.poll(() => row(page, google).locator("td.permits").textContent(), poll).toBe("3 / 4")
    expect(await row(page, google).locator("td.permits").getAttribute("data-learned")).toBeNull()

    // The provider refuses the third call with a 429: the two beside it are what it takes at once.
    await server.run(
      apply([
        { _tag: "Release", resource: google, callId: "g3", holder: holder("g3"), reached: true, rateLimited: true }
      ])
    )

    const permits = row(page, google).locator("td.permits")
    await expect.poll(() => permits.textContent(), poll).toBe("2 / 4 (learned 2)")
    expect(await permits.getAttribute("data-learned")).toBe("2")
    expect(await permits.locator("span.learned").getAttribute("title")).toContain("learned from the provider's 429s")
    // A 429 that teaches a cap does not pause the resource by itself (the worker's Pause does).
    expect(await row(page, google).getAttribute("data-paused")).toBe("")
    await page.screenshot({ path: `${shots}resources-learned.png`, fullPage: true })
  })

  it("refuses a form post to resume from another site: the pause stays", async () => {
    await server.run(apply([{ _tag: "Pause", resource: anthropic, kind: "manual", until: null, reason: "by hand" }]))
    const target = `${server.url}/v1/resources/${encodeURIComponent(anthropic)}/resume`
    const evil: NodeServer = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" })
      res.end(`<!doctype html><form id="f" method="post" enctype="text/plain" action="${target}">
        <input name='{"a":"' value='"}'></form>`)
    })
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve))
    const address = evil.address()
    const evilUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/`
    const attacker = await browser.newPage()
    try {
      await attacker.goto(evilUrl)
      const [answer] = await Promise.all([
        attacker.waitForResponse((response) => response.url() === target),
        attacker.evaluate("document.getElementById('f').submit()")
      ])
      expect(answer.status()).toBe(403)
      expect((await server.run(stateOf(anthropic))).pause?.kind).toBe("manual")
    } finally {
      await attacker.close()
      await new Promise((resolve) => evil.close(resolve))
    }
  })

  it("with tokens, a tenant that is not an operator sees the view but cannot resume", async () => {
    const operator = Auth.makeToken()
    const tenant = Auth.makeToken()
    const tokens = Either.getOrThrow(
      Auth.parseTokens(`ops ${Auth.hashToken(operator)}\nacme ${Auth.hashToken(tenant)}`)
    )
    const secured = await start(memoryBackend(), { tokens, operators: ["ops"] })
    const view = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    try {
      await secured.run(
        apply([{ _tag: "Pause", resource: openai, kind: "quota_exhausted", until: null, reason: "cap" }])
      )
      await view.goto(`${secured.url}/#/resources`)
      await expect.poll(() => view.textContent("#conn"), poll).toBe("unauthorized: set the API token")
      await view.fill("#token", tenant)
      await view.locator("#token").press("Tab")
      await row(view, openai).waitFor()
      await row(view, openai)
        .getByRole("button", { name: `Resume ${openai}` })
        .click()
      await expect
        .poll(() => view.textContent("#resource-status"))
        .toBe(`Could not resume ${openai}: only an operator's token may.`)
      expect((await secured.run(stateOf(openai))).pause?.kind).toBe("quota_exhausted")

      await view.fill("#token", operator)
      await view.locator("#token").press("Tab")
      await row(view, openai)
        .getByRole("button", { name: `Resume ${openai}` })
        .click()
      await expect.poll(() => row(view, openai).getAttribute("data-paused"), poll).toBe("")
      expect((await secured.run(stateOf(openai))).pause).toBeNull()
    } finally {
      await view.close()
      await secured.close()
    }
  })
})
