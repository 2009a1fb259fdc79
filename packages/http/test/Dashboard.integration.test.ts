/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core): a job submitted through the API
 * appears and changes state live, the job page shows attempts, charges and the timeline, and a group of dead
 * letters is replayed from the page with the keyboard. Then what makes it scale and safe: paging and filters, dead
 * letters grouped by error class with their inputs beneath and sorted by count or cost, readable evidence, attempts
 * per run and in all, the spend panel, the warning for jobs no worker claims, no planted secret on a page, and a
 * form post from another site refused while the dashboard keeps submitting and replaying. Screenshots go to
 * test-output/dashboard/.
 */
import { mkdirSync } from "node:fs"
import { createServer, type Server as NodeServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Effect, Either, Layer } from "effect"
import fc from "fast-check"
import { type Browser, chromium, type Page } from "playwright-core"
import { planted } from "../../core/test/secrets.js"
import * as Auth from "../src/Auth.js"
import { charge, claim, completeJob, failJob, post, settle } from "./contract.js"
import { type Running, start } from "./harness.js"

const shots = new URL("../../../test-output/dashboard/", import.meta.url).pathname
const chromiumFlags = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

describe("dashboard in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true })
    server = await start(Layer.merge(Store.layerMemory, Transport.layerMemory()), { queue: "dashboard" })
    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: chromiumFlags })
    page = await browser.newPage({ viewport: { width: 1366, height: 900 } })
  })
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  const submit = async (body: Record<string, unknown>) =>
    (await (await post(server.url, "/v1/jobs", body)).json()) as any

  it("shows a job submitted through the API and follows its state live", async () => {
    await page.goto(`${server.url}/`)
    await expect.poll(() => page.textContent("#conn")).toBe("live")
    const job = await submit({ type: "test.work", input: { text: "summarise this" }, priority: 2 })
    const row = page.locator(`tr[data-job-id="${job.id}"]`)
    await row.waitFor()
    expect(await row.getAttribute("data-state")).toBe("queued")
    expect(await page.locator('.count[data-state="queued"] .n').textContent()).toBe("1")

    const claimed = await server.run(claim(job.id))
    await expect.poll(() => row.getAttribute("data-state")).toBe("running")
    await server.run(charge(claimed, 3))
    await page.screenshot({ path: `${shots}overview-running.png`, fullPage: true })
    await server.run(settle(claimed, { _tag: "Complete", result: { summary: "short" } }))
    await expect.poll(() => row.getAttribute("data-state")).toBe("succeeded")
    expect(await page.locator('.count[data-state="succeeded"] .n').textContent()).toBe("1")

    // The job page: opened from the list, updated by the event stream.
    await row.locator("a").click()
    await page.locator("#job-state").waitFor()
    expect(await page.locator("#job-state").getAttribute("data-state")).toBe("succeeded")
    expect(await page.locator("#attempts tbody tr").count()).toBe(1)
    expect(await page.locator("#charges").textContent()).toContain("3¢")
    expect(await page.locator("#job-result").textContent()).toContain("short")
    await page.screenshot({ path: `${shots}job-page.png`, fullPage: true })
  })

  it("follows a running job on its page until it ends", async () => {
    const job = await submit({ type: "test.work", input: { text: "live page" } })
    await page.goto(`${server.url}/#/jobs/${job.id}`)
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("queued")
    const claimed = await server.run(claim(job.id))
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("running")
    await server.run(
      settle(claimed, {
        _tag: "Fail",
        errorClass: "content_filtered",
        error: "HTTP 400 from provider; x-api-key: sk-ant-abcdefabcdefabcdef"
      })
    )
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("failed")
    const evidence = await page.locator("#attempts").textContent()
    expect(evidence).toContain("content_filtered")
    expect(evidence).not.toContain("abcdefabcdef")
  })

  it("replays a group of dead letters from the page, with the keyboard, showing progress", async () => {
    const poison = { text: "always fails" }
    const failed = [
      await submit({ type: "test.work", input: poison }),
      await submit({ type: "test.work", input: poison })
    ]
    const other = await submit({ type: "test.work", input: { text: "throttled" } })
    for (const job of failed) await server.run(failJob(job.id, "auth", 2))
    await server.run(failJob(other.id, "rate_limited", 1))
    const ok = await submit({ type: "test.work", input: { text: "fine" } })
    await server.run(completeJob(ok.id))

    await page.goto(`${server.url}/#/dead-letters`)
    const group = page.locator('#groups-table tr[data-error-class="auth"]').filter({ hasText: "2" })
    await group.waitFor()
    expect(await page.locator("#chart svg rect").count()).toBe(15)
    await page.screenshot({ path: `${shots}dead-letters.png`, fullPage: true })

    const button = group.getByRole("button", { name: /Replay 2 auth dead letters/ })
    await button.focus()
    await page.keyboard.press("Enter")
    await expect.poll(() => page.textContent("#replay-status")).toMatch(/Done: replayed 2 of 2/)
    expect(await page.locator("#replay-progress").getAttribute("value")).toBe("2")
    await page.screenshot({ path: `${shots}dead-letters-replayed.png`, fullPage: true })

    const states = await server.run(
      Effect.forEach([...failed, other, ok], (job) =>
        Effect.flatMap(Query, (query) => query.get({ jobId: job.id as JobId })).pipe(
          Effect.map((current) => current.state)
        )
      )
    )
    expect(states).toEqual(["queued", "queued", "failed", "succeeded"])
    await expect.poll(() => page.locator('#groups-table tr[data-error-class="auth"]').count()).toBe(0)
  })

  it("is usable from the keyboard: skip link, navigation and focus outlines", async () => {
    await page.goto(`${server.url}/`)
    await expect.poll(() => page.locator("#recent-table tbody tr").count()).toBeGreaterThan(3)
    await page.locator("#cost table").waitFor()
    await page.screenshot({ path: `${shots}overview.png`, fullPage: true })
    await page.keyboard.press("Tab")
    expect(await page.evaluate("document.activeElement?.textContent")).toBe("Skip to content")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    expect(await page.evaluate("document.activeElement?.id")).toBe("nav-dlq")
    await page.keyboard.press("Enter")
    await expect.poll(() => page.evaluate("location.hash")).toBe("#/dead-letters")
    await expect.poll(() => page.locator("#nav-dlq").getAttribute("aria-current")).toBe("page")
    await expect.poll(() => page.locator("#nav-overview").getAttribute("aria-current")).toBeNull()
  })

  it("pages through jobs and filters them by state, type, error class, request key and id", async () => {
    const made: Array<any> = []
    for (let i = 0; i < 30; i++) {
      const response = await post(
        server.url,
        "/v1/jobs",
        { type: i % 3 === 0 ? "demo.echo" : "test.work", input: { i } },
        {
          "idempotency-key": `page-${i}`
        }
      )
      made.push(await response.json())
    }
    await server.run(failJob(made[3].id, "rate_limited", 1))
    // The ids of the rows shown, in order: a filter is applied once the table shows exactly what it selects.
    const rowIds = async () =>
      (
        await page
          .locator("#recent-table tbody tr")
          .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job-id")))
      ).join(",")
    await page.goto(`${server.url}/`)
    await expect.poll(() => page.locator("#recent-table tbody tr").count()).toBe(25)
    expect(await page.locator("#page-newer").isDisabled()).toBe(true)
    const firstPage = await page
      .locator("#recent-table tbody tr")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job-id")))
    expect(firstPage[0]).toBe(made[29].id)

    await page.locator("#page-older").click()
    await expect.poll(() => page.textContent("#page-label")).toBe("page 2")
    await expect.poll(async () => page.locator(`tr[data-job-id="${made[4].id}"]`).count()).toBe(1)
    const secondPage = await page
      .locator("#recent-table tbody tr")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job-id")))
    expect(secondPage.filter((id) => firstPage.includes(id))).toEqual([])
    await page.locator("#page-newer").click()
    await expect.poll(() => page.textContent("#page-label")).toBe("page 1")

    await page.selectOption("#filter-state", "failed")
    await page.selectOption("#filter-error-class", "rate_limited")
    await page.fill("#filter-type", "demo.echo")
    await page.locator("#apply-filters").click()
    // Poll for the expected row itself: a count alone can be met by the table the previous filter left.
    await expect.poll(rowIds).toBe(made[3].id)
    await page.screenshot({ path: `${shots}jobs-filtered.png`, fullPage: true })

    await page.selectOption("#filter-state", "")
    await page.selectOption("#filter-error-class", "")
    await page.fill("#filter-type", "")
    await page.fill("#filter-request-key", "page-7")
    await page.locator("#apply-filters").click()
    await expect.poll(rowIds).toBe(made[7].id)

    await page.fill("#filter-id", made[11].id)
    await page.locator("#apply-filters").click()
    await expect.poll(() => page.locator("#job-state").count()).toBe(1)
    expect(await page.textContent("#h-job")).toContain(made[11].id)
    await page.goto(`${server.url}/#/`)
    await page.fill("#filter-request-key", "")
    await page.locator("#apply-filters").click()
  })

  it("groups dead letters by error class with their inputs beneath, sorted by count or by cost", async () => {
    // A server of its own: only this test's dead letters.
    const own = await start(Layer.merge(Store.layerMemory, Transport.layerMemory()), { queue: "groups" })
    const page = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    const server = own
    const submit = async (body: Record<string, unknown>) =>
      (await (await post(own.url, "/v1/jobs", body)).json()) as any
    try {
      // Twelve dear single-input failures of one class, two cheap ones of another input pair.
      for (let i = 0; i < 12; i++) {
        const job = await submit({ type: "test.work", input: { one: i } })
        await server.run(failJob(job.id, "rate_limited", 1))
      }
      for (let i = 0; i < 2; i++) {
        const job = await submit({ type: "test.work", input: { twin: true } })
        await server.run(failJob(job.id, "auth", 20))
      }
      await page.goto(`${server.url}/#/dead-letters`)
      const classes = () =>
        page
          .locator("#groups-table tr.class-row")
          .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-error-class")))
      await expect.poll(classes).toEqual(["rate_limited", "auth"])
      expect(await page.locator('#groups-table tr.hash-row[data-parent-class="rate_limited"]').count()).toBe(12)
      expect(await page.locator('#groups-table tr.hash-row[data-parent-class="auth"]').count()).toBe(1)
      expect(await page.locator('#groups-table tr.class-row[data-error-class="rate_limited"]').textContent()).toContain(
        "12 inputs"
      )
      await page.locator("#sort-cost").click()
      await expect.poll(classes).toEqual(["auth", "rate_limited"])
      expect(await page.locator("#sort-cost").locator("..").getAttribute("aria-sort")).toBe("descending")
      await page.screenshot({ path: `${shots}dead-letters-by-class.png`, fullPage: true })

      // Replay the whole class from its row: every job of it moves.
      await page.getByRole("button", { name: "Replay 12 rate_limited dead letters", exact: true }).click()
      await expect.poll(() => page.textContent("#replay-status")).toMatch(/Done: replayed 12 of 12/)
      await expect.poll(classes).toEqual(["auth"])
    } finally {
      await page.close()
      await own.close()
    }
  })

  it("shows attempts per run and in all, and evidence readable across the whole table", async () => {
    const job = await submit({ type: "test.work", input: { text: "replayed" }, maxAttempts: 1 })
    const long = `HTTP 400 invalid_input:\ntext: Expected string, actual 42\nextra: is unexpected\n${"context ".repeat(40)}`
    const first = await server.run(claim(job.id))
    await server.run(settle(first, { _tag: "Fail", errorClass: "invalid_input", error: long }))
    await post(server.url, "/v1/dead-letters/replay", { ids: [job.id] })
    const second = await server.run(claim(job.id))
    await server.run(settle(second, { _tag: "Fail", errorClass: "invalid_input", error: long }))

    await page.goto(`${server.url}/#/jobs/${job.id}`)
    await expect.poll(() => page.locator("#job-attempts").textContent()).toBe("1 of 1 in this run, 2 in all")
    const evidence = page.locator("#attempts tr.evidence pre").first()
    await evidence.waitFor()
    // Measured in one step in the page: the job page redraws as its events arrive.
    const widths = (await page.evaluate(`(() => {
      const table = document.querySelector("#attempts").getBoundingClientRect().width
      const pre = document.querySelector("#attempts tr.evidence pre")
      return { table, pre: pre.getBoundingClientRect().width, text: pre.textContent }
    })()`)) as { table: number; pre: number; text: string }
    expect(widths.pre).toBeGreaterThan(widths.table * 0.9)
    expect(widths.text).toContain("text: Expected string, actual 42")
    await page.screenshot({ path: `${shots}job-attempts-evidence.png`, fullPage: true })
    await page.goto(`${server.url}/#/dead-letters`)
    await expect.poll(() => page.locator("#dl-jobs").textContent()).toContain("1/1 (2 in all)")
  })

  it("shows spend over the window, succeeded against failed", async () => {
    const ok = await submit({ type: "test.work", input: { text: "paid" } })
    const claimed = await server.run(claim(ok.id))
    await server.run(charge(claimed, 7))
    await server.run(settle(claimed, { _tag: "Complete", result: null }))
    const stats = (await (await fetch(`${server.url}/v1/stats`)).json()) as any

    await page.goto(`${server.url}/`)
    await expect
      .poll(() => page.locator("#spend-succeeded strong").textContent())
      .toBe(`${stats.spend.succeededCents}¢`)
    expect(await page.locator("#spend-failed strong").textContent()).toBe(`${stats.spend.failedCents}¢`)
    expect(stats.spend.succeededCents).toBeGreaterThanOrEqual(7)
    expect(await page.locator('#spend-table tr[data-state="succeeded"][data-type="test.work"]').count()).toBe(1)
    await page.selectOption("#spend-window", "1440")
    await page.locator("#spend table").waitFor()
    await page.screenshot({ path: `${shots}spend.png`, fullPage: true })
  })

  it("warns about jobs no worker claims", async () => {
    const other = await start(Layer.merge(Store.layerMemory, Transport.layerMemory()), { unclaimedAfterSeconds: 1 })
    try {
      await post(other.url, "/v1/jobs", { type: "test.work", version: 4 })
      const view = await browser.newPage({ viewport: { width: 1366, height: 900 } })
      await view.goto(`${other.url}/`)
      await expect.poll(() => view.locator("#unclaimed-warning").count(), { timeout: 10_000 }).toBe(1)
      expect(
        await view.locator('#unclaimed-warning li[data-type="test.work"][data-version="4"]').textContent()
      ).toMatch(/test\.work v4: 1 waiting/)
      await view.screenshot({ path: `${shots}unclaimed-warning.png`, fullPage: true })
      await view.close()
    } finally {
      await other.close()
    }
  })

  it("no planted secret reaches a page", async () => {
    const secrets = fc.sample(planted, { numRuns: 40, seed: 16 })
    const job = await submit({ type: "test.work", input: { text: "leaky" }, maxAttempts: 40 })
    for (const secret of secrets) {
      const claimed = await server.run(claim(job.id))
      await server.run(
        settle(claimed, { _tag: "Retry", delayMs: 0, errorClass: "auth", error: `provider said: ${secret.text}` })
      )
    }
    await page.goto(`${server.url}/#/jobs/${job.id}`)
    await expect.poll(() => page.locator("#attempts tr.attempt").count()).toBe(secrets.length)
    const text = (await page.locator("body").textContent()) + (await page.content())
    expect(text).toContain("provider said:")
    for (const secret of secrets) expect(text, secret.format).not.toContain(secret.body)
  })

  it("refuses a form post from another site, while the dashboard still submits and replays", async () => {
    // A page on another origin that posts a job with a plain form, as an attacker's page would.
    const target = `${server.url}/v1/jobs`
    const evil: NodeServer = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" })
      res.end(`<!doctype html><form id="f" method="post" enctype="text/plain" action="${target}">
        <input name='{"type":"test.work","input":{"x":"' value='"}}'></form>
        <form id="g" method="post" action="${server.url}/v1/dead-letters/replay"><input name="errorClass" value="auth"></form>`)
    })
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve))
    const address = evil.address()
    const evilUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/`
    try {
      const before = await server.run(Effect.flatMap(Query, (query) => query.list({ limit: null })))
      const failedBefore = before.filter((job) => job.state === "failed").length
      const attacker = await browser.newPage()
      await attacker.goto(evilUrl)
      const [jobAnswer] = await Promise.all([
        attacker.waitForResponse((response) => response.url() === target),
        attacker.evaluate("document.getElementById('f').submit()")
      ])
      expect(jobAnswer.status()).toBe(403)
      await attacker.waitForURL(target)
      expect(await attacker.textContent("body")).toContain("cross_site_request")
      await attacker.goto(evilUrl)
      const [replayAnswer] = await Promise.all([
        attacker.waitForResponse((response) => response.url().endsWith("/v1/dead-letters/replay")),
        attacker.evaluate("document.getElementById('g').submit()")
      ])
      expect(replayAnswer.status()).toBe(403)
      await attacker.waitForURL(/\/v1\/dead-letters\/replay$/)
      await attacker.screenshot({ path: `${shots}cross-site-form-refused.png` })
      await attacker.close()
      const after = await server.run(Effect.flatMap(Query, (query) => query.list({ limit: null })))
      expect(after.length).toBe(before.length)
      expect(after.filter((job) => job.state === "failed").length).toBe(failedBefore)

      // The dashboard, on its own origin, still submits...
      await page.goto(`${server.url}/`)
      await page.fill("#submit-type", "test.work")
      await page.fill("#submit-input", '{"text":"from the dashboard"}')
      await page.getByRole("button", { name: "Submit job" }).click()
      await expect.poll(() => page.textContent("#submit-status")).toMatch(/^submitted /)
      const mine = await server.run(Effect.flatMap(Query, (query) => query.list({ limit: 1 })))
      expect(mine[0]!.input).toEqual({ text: "from the dashboard" })
      // ...and replays.
      await server.run(failJob(mine[0]!.id, "auth", 1))
      await page.goto(`${server.url}/#/dead-letters`)
      const button = page.locator('#groups-table tr.class-row[data-error-class="auth"]').getByRole("button")
      await button.click()
      await expect.poll(() => page.textContent("#replay-status")).toMatch(/^Done: replayed [1-9]\d* of /)
      expect((await server.run(Effect.flatMap(Query, (query) => query.get({ jobId: mine[0]!.id })))).state).toBe(
        "queued"
      )
    } finally {
      await new Promise((resolve) => evil.close(resolve))
    }
  })

  it("the token field opens a server with authentication: only the token's tenant is shown", async () => {
    const token = Auth.makeToken()
    const table = Either.getOrThrow(Auth.parseTokens(`acme ${Auth.hashToken(token)}`))
    const secured = await start(Layer.merge(Store.layerMemory, Transport.layerMemory()), { tokens: table })
    const view = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    try {
      const created = (await (
        await post(secured.url, "/v1/jobs", { type: "test.work" }, { authorization: `Bearer ${token}` })
      ).json()) as any
      await view.goto(`${secured.url}/`)
      await expect.poll(() => view.textContent("#conn")).toBe("unauthorized: set the API token")
      await view.fill("#token", token)
      await view.locator("#token").press("Tab")
      await expect.poll(() => view.textContent("#conn")).toBe("live")
      await view.locator(`tr[data-job-id="${created.id}"]`).waitFor()
      // The page keeps the token for the next visit and sends it with its writes too.
      await view.fill("#submit-type", "test.work")
      await view.getByRole("button", { name: "Submit job" }).click()
      await expect.poll(() => view.textContent("#submit-status")).toMatch(/^submitted /)
      const jobs = await secured.run(Effect.flatMap(Query, (query) => query.list({ limit: null })))
      expect(jobs.map((job) => job.tenant)).toEqual(["acme", "acme"])
    } finally {
      await view.close()
      await secured.close()
    }
  })
})
