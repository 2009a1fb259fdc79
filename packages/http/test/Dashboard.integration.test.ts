/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core): a job submitted through the API
 * appears and changes state live, and the job page shows attempts, charges and the timeline. Then what makes it
 * scale and safe: paging and filters, readable evidence, attempts per run and in all, the spend panel, the warning
 * for jobs no worker claims, no planted secret on a page, and a form post from another site refused while the
 * dashboard keeps submitting and replaying. At 500 demo jobs (`seed.ts`): the total and page count with first, last
 * and page-size jumps, every setting in the URL, a job found by an upper-case or partial id (or a clear word that
 * none matches), a lapsed lease marked, and every view at 1280x800 and 1920x1080 without sideways scrolling or ids
 * and times broken over two lines. Then amounts as money, Replay on a failed job's page, the cost of a retried
 * attempt kept after success; dead letters with a sample input and the last error per group, page by page, and
 * replays (whole, per group) that ask with a dry run's count and estimate before one request does the work; a job's
 * input on its page. The resource view is among the views checked at both sizes (its behaviour:
 * `DashboardResources.integration.test.ts`). Screenshots go to test-output/dashboard/ (every view: test-output/dashboard/views/).
 */
import { mkdirSync } from "node:fs"
import { createServer, type Server as NodeServer } from "node:http"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { JobId, Json } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as ScheduleModule from "@slowcall/schedules/Schedule"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Either } from "effect"
import fc from "fast-check"
import type { Browser, Page } from "playwright-core"
import { planted } from "../../core/test/secrets.js"
import * as Auth from "../src/Auth.js"
import { money } from "../src/View.js"
import { launchChromium, memoryBackend, openDashboard, shots } from "./browser.js"
import { charge, claim, failJob, post, settle } from "./contract.js"
import { type Running, start } from "./harness.js"
import { demoTypes, type Seeded, seedDemo } from "./seed.js"

describe("dashboard in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page
  let close = async () => {}

  beforeAll(async () => {
    ;({ server, browser, page, close } = await openDashboard({ queue: "dashboard" }))
  })
  afterAll(() => close())

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
    expect(await page.locator("#charges").textContent()).toContain("$0.03")
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

  it("is usable from the keyboard: skip link, navigation and focus outlines", async () => {
    await page.goto(`${server.url}/`)
    await expect.poll(() => page.locator("#recent-table tbody tr").count()).toBeGreaterThan(1)
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
    await expect.poll(() => page.textContent("#page-label")).toMatch(/^page 2 of \d+ · \d+ jobs$/)
    await expect.poll(async () => page.locator(`tr[data-job-id="${made[4].id}"]`).count()).toBe(1)
    const secondPage = await page
      .locator("#recent-table tbody tr")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job-id")))
    expect(secondPage.filter((id) => firstPage.includes(id))).toEqual([])
    await page.locator("#page-newer").click()
    await expect.poll(() => page.textContent("#page-label")).toMatch(/^page 1 of /)

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

    await page.fill("#search-id", made[11].id)
    await page.locator("#search-id").press("Enter")
    await expect.poll(() => page.locator("#job-state").count()).toBe(1)
    expect(await page.textContent("#h-job")).toContain(made[11].id)
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
      .toBe(money(stats.spend.succeededCents))
    expect(await page.locator("#spend-failed strong").textContent()).toBe(money(stats.spend.failedCents))
    expect(stats.spend.succeededCents).toBeGreaterThanOrEqual(7)
    expect(await page.locator('#spend-table tr[data-state="succeeded"][data-type="test.work"]').count()).toBe(1)
    await page.selectOption("#spend-window", "1440")
    await page.locator("#spend table").waitFor()
    await page.screenshot({ path: `${shots}spend.png`, fullPage: true })
  })

  it("warns about jobs no worker claims", async () => {
    const other = await start(memoryBackend(), { unclaimedAfterSeconds: 1 })
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
      // ...and replays (from the job's page).
      await server.run(failJob(mine[0]!.id, "auth", 1))
      await page.goto(`${server.url}/#/jobs/${mine[0]!.id}`)
      await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("failed")
      await page.getByRole("button", { name: "Replay" }).click()
      await expect.poll(() => page.textContent("#job-action-status")).toMatch(/^Replayed: the job is queued again/)
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
    const secured = await start(memoryBackend(), { tokens: table })
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

/** Whether the page scrolls sideways: the document wider than the window. */
const overflow = (page: Page) =>
  page.evaluate(
    "({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })"
  ) as Promise<{ scrollWidth: number; clientWidth: number }>

/** The elements among `selector` that take more than one line (an inline box broken over lines has several rects). */
const wrapped = (page: Page, selector: string) =>
  page
    .locator(selector)
    .evaluateAll((elements) => elements.filter((el) => el.getClientRects().length > 1).map((el) => el.textContent))

describe("dashboard at 500 jobs in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page
  let seeded: Seeded
  const queue = "demo"

  beforeAll(async () => {
    mkdirSync(`${shots}views/`, { recursive: true })
    server = await start(memoryBackend(), {
      queue,
      jobTypes: [...demoTypes]
    })
    seeded = await server.run(seedDemo({ queue, count: 500, seed: 29, now: Date.now() }))
    // The resources view: limits on every dimension, the longest id the API takes, a paused resource.
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        Effect.zipRight(
          limiter.define({
            items: [
              {
                resource: "openai:gpt-4.1:org/key-a",
                limits: {
                  maxConcurrent: 16,
                  requestsPerMinute: 500,
                  inputTokensPerMinute: 200_000,
                  outputTokensPerMinute: 80_000,
                  priorityShare: { minPriority: 1, share: 0.25 }
                }
              },
              { resource: `anthropic:sonnet:${"k".repeat(180)}`, limits: { requestsPerMinute: 50 } }
            ]
          }),
          limiter.apply({
            items: [
              {
                _tag: "Pause",
                resource: `anthropic:sonnet:${"k".repeat(180)}`,
                kind: "quota_exhausted",
                until: null,
                reason: "enforced_spend_limit_reached: your organization reached its monthly spend limit"
              }
            ]
          })
        )
      )
    )
    // The schedules view: the longest id the API takes, a paused one, one whose last tick made a job.
    await server.run(
      Effect.gen(function* () {
        const store = yield* ScheduleStore.ScheduleStore
        const define = (options: ScheduleModule.MakeOptions) => Either.getOrThrow(ScheduleModule.make(options))
        const nightly = define({
          id: "nightly-summary",
          cron: "0 2 * * *",
          timezone: "Europe/Berlin",
          job: { queue, type: "report.summary" },
          catchUp: "latest"
        })
        // Written three days ago; its last tick, a day or two ago, made a job.
        const created = Date.now() - 3 * 86_400_000
        yield* store.upsert(
          [
            nightly,
            define({
              id: `import/${"s".repeat(190)}`,
              cron: "*/10 * * * * *",
              job: { queue, type: "demo.echo" },
              overlap: "cancelPrevious",
              catchUp: { all: 3_600_000 }
            })
          ],
          { now: created }
        )
        yield* store.pause(`import/${"s".repeat(190)}`)
        yield* store.advance(
          "nightly-summary",
          ScheduleModule.nextTick(nightly, created + 86_400_000)!,
          seeded.succeeded[0]!
        )
      })
    )
    browser = await launchChromium()
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  })
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  /** Every job of the queue, newest first, as the API lists them. */
  const allIds = async () =>
    ((await (await fetch(`${server.url}/v1/jobs?limit=1000`)).json()) as any).jobs.map((job: any) => job.id as string)
  const rowIds = (view: Page, table = "#recent-table") =>
    view.locator(`${table} tbody tr`).evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job-id")))
  const label = () => page.textContent("#page-label")

  it("shows the total and the page count, and jumps to the last page, back and to another page size", async () => {
    const ids = await allIds()
    expect(ids).toHaveLength(500)
    await page.goto(`${server.url}/#/`)
    await expect.poll(label).toBe("page 1 of 20 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(0, 25))

    // The oldest jobs are one click away, not 19.
    await page.locator("#page-last").click()
    await expect.poll(label).toBe("page 20 of 20 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(475))
    expect(await page.locator("#page-older").isDisabled()).toBe(true)
    expect(await page.locator("#page-last").isDisabled()).toBe(true)
    await page.locator("#page-newer").click()
    await expect.poll(label).toBe("page 19 of 20 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(450, 475))
    await page.locator("#page-older").click()
    await expect.poll(label).toBe("page 20 of 20 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(475))

    await page.selectOption("#page-size", "200")
    await expect.poll(label).toBe("page 1 of 3 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(0, 200))
    await page.locator("#page-last").click()
    await expect.poll(label).toBe("page 3 of 3 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(400))
    await page.locator("#page-newer").click()
    await expect.poll(label).toBe("page 2 of 3 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(200, 400))
    await page.locator("#page-first").click()
    await expect.poll(label).toBe("page 1 of 3 · 500 jobs")
    expect(await rowIds(page)).toEqual(ids.slice(0, 200))
  })

  it("keeps filters, the page and the page size in the URL: a reload and another tab show the same view", async () => {
    const failed = ((await (await fetch(`${server.url}/v1/jobs?state=failed&limit=1000`)).json()) as any).jobs.map(
      (job: any) => job.id as string
    )
    expect(failed.length).toBeGreaterThan(50)
    await page.goto(`${server.url}/#/`)
    await page.selectOption("#page-size", "50")
    await page.selectOption("#filter-state", "failed")
    await page.locator("#apply-filters").click()
    await expect.poll(label).toBe(`page 1 of 2 · ${failed.length} jobs`)
    await page.locator("#page-older").click()
    await expect.poll(label).toBe(`page 2 of 2 · ${failed.length} jobs`)
    expect(await rowIds(page)).toEqual(failed.slice(50))
    const url = page.url()
    expect(new URL(url).hash).toMatch(/state=failed/)
    expect(new URL(url).hash).toMatch(/size=50/)

    await page.reload()
    await expect.poll(label).toBe(`page 2 of 2 · ${failed.length} jobs`)
    expect(await rowIds(page)).toEqual(failed.slice(50))
    expect(await page.inputValue("#filter-state")).toBe("failed")
    expect(await page.inputValue("#page-size")).toBe("50")

    const other = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    try {
      await other.goto(url)
      await expect.poll(() => other.textContent("#page-label")).toBe(`page 2 of 2 · ${failed.length} jobs`)
      expect(await rowIds(other)).toEqual(failed.slice(50))
    } finally {
      await other.close()
    }
    // Back in history: the filter goes with the URL, and the form follows.
    await page.goBack()
    await expect.poll(label).toBe(`page 1 of 2 · ${failed.length} jobs`)
    await page.goBack()
    await expect.poll(label).toBe("page 1 of 10 · 500 jobs")
    expect(await page.inputValue("#filter-state")).toBe("")
  })

  it("finds a job by an upper-case or partial id, says when none matches, and never stays on connecting…", async () => {
    const ids = await allIds()
    const sharing = (prefix: string) => ids.filter((id: string) => id.startsWith(prefix))
    // The shortest start of an id that no other id shares.
    const uniqueStart = (id: string) => {
      let length = 9
      while (sharing(id.slice(0, length)).length > 1) length++
      return length
    }
    // A dead letter whose id shares one character less with a few others (not with more than a page of results).
    const target = seeded.failed.find((id) => sharing(id.slice(0, uniqueStart(id) - 1)).length <= 50)!
    const unique = uniqueStart(target)
    const find = async (text: string) => {
      await page.fill("#search-id", text)
      await page.locator("#search-id").press("Enter")
    }
    const conn = () => page.textContent("#conn")

    // A fresh page opened on an upper-case id in the URL.
    await page.goto(`${server.url}/#/jobs/${target.toUpperCase()}`)
    await expect.poll(() => page.evaluate("location.hash")).toBe(`#/jobs/${target}`)
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("failed")
    expect(await conn()).toBe("live")

    await page.goto(`${server.url}/#/`)
    await find(` ${target.toUpperCase()} `)
    await expect.poll(() => page.textContent("#h-job")).toContain(target)
    for (const partial of [
      target.slice(0, unique),
      target.slice(0, unique).toUpperCase(),
      `${target.slice(0, 8)}…${target.slice(-4)}`
    ]) {
      await page.goto(`${server.url}/#/`)
      await find(partial)
      await expect.poll(() => page.evaluate("location.hash"), { message: partial }).toBe(`#/jobs/${target}`)
      await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("failed")
    }
    // A start several ids share lists them.
    const shared = target.slice(0, unique - 1)
    await find(shared)
    await expect.poll(() => page.textContent("#search-message")).toContain(`with an id that starts with “${shared}”`)
    expect((await rowIds(page, "#search-table")).sort()).toEqual(sharing(shared).sort())
    // A start most ids share (the time part of a UUID v7): the newest 50, and a word on narrowing it down.
    await find(target.slice(0, 4))
    await expect
      .poll(() => page.textContent("#search-message"))
      .toBe(
        `More than 50 jobs have an id that starts with “${target.slice(0, 4)}”: the newest 50 are below. Type more of the id to narrow it down.`
      )
    expect(await rowIds(page, "#search-table")).toEqual(sharing(target.slice(0, 4)).slice(0, 50))
    await page.screenshot({ path: `${shots}search-results.png`, fullPage: true })

    // Nothing matches, not an id at all, and a well-formed id of no job: each says so, and the page is live.
    await find("ffffffff")
    await expect
      .poll(() => page.textContent("#search-message"))
      .toBe("No job with an id that starts with “ffffffff” among all 500 jobs.")
    expect(await conn()).toBe("live")
    await find("not-a-job")
    await expect.poll(() => page.textContent("#search-message")).toMatch(/^“not-a-job” is not a job id/)
    const unknown = "01900000-0000-7000-8000-000000000000"
    await find(unknown)
    await expect.poll(() => page.textContent("#job-missing")).toContain(`No job with id ${unknown}.`)
    expect(await conn()).toBe("live")
    await page.goto(`${server.url}/#/jobs/0190ABC`)
    await expect.poll(() => page.evaluate("location.hash")).toBe("#/search?id=0190ABC")
    await expect
      .poll(() => page.textContent("#search-message"))
      .toContain("No job with an id that starts with “0190abc”")
    expect(await conn()).toBe("live")
    await page.goto(`${server.url}/#/nowhere`)
    await expect.poll(() => page.textContent("#not-found")).toContain("Nothing lives at #/nowhere")
    expect(await conn()).toBe("live")
  })

  it("marks a running job whose lease has lapsed, with the lease's end and the age of its last heartbeat", async () => {
    // A time as the page writes it: the clock time today, the day and time before (or after) today.
    const clock = String.raw`(\d\d:\d\d:\d\d|[A-Z][a-z]{2} \d{1,2} \d\d:\d\d)`
    const gone = seeded.lapsed[0]!
    const live = seeded.running[0]!
    await page.goto(`${server.url}/#/`)
    await page.locator("#page-size").selectOption("200")
    const row = page.locator(`tr[data-job-id="${gone}"]`)
    await row.waitFor()
    expect(await row.getAttribute("data-lapsed")).toBe("true")
    expect(await row.locator(".tag-lapsed").textContent()).toBe("lease lapsed")
    expect(await page.locator(`tr[data-job-id="${live}"]`).getAttribute("data-lapsed")).toBeNull()

    await page.goto(`${server.url}/#/jobs/${gone}`)
    await expect.poll(() => page.locator("#job-lease").getAttribute("data-lapsed")).toBe("true")
    expect(await page.textContent("#job-lease")).toMatch(
      new RegExp(
        String.raw`^Lease lapsed [\d.]+ (s|min) ago \(it ended at ${clock}\)\. Its worker \(worker-ip-10-0-12-34\..+\) stopped renewing it and was last heard from [\d.]+ (s|min) ago\.`
      )
    )
    expect(await page.locator("#job-lapsed").isVisible()).toBe(true)
    expect(await page.textContent("#job-progress")).toMatch(/% when its lease lapsed$/)

    await page.goto(`${server.url}/#/jobs/${live}`)
    await expect.poll(() => page.locator("#job-lease").getAttribute("data-lapsed")).toBe("false")
    expect(await page.textContent("#job-lease")).toMatch(
      new RegExp(
        String.raw`^Lease held by worker-ip-10-0-12-34\..+ until ${clock} \(in [\d.]+ min\); last heartbeat or progress [\d.]+ s ago\.$`
      )
    )
    expect(await page.locator("#job-lapsed").isVisible()).toBe(false)
  })

  const views: ReadonlyArray<{ readonly name: string; readonly hash: () => string; readonly ready: string }> = [
    { name: "overview", hash: () => "#/", ready: "#recent-table" },
    { name: "overview-filtered", hash: () => "#/?state=failed&size=50", ready: "#recent-table" },
    { name: "overview-last-page", hash: () => "#/?page=last&size=100", ready: "#recent-table" },
    { name: "spend-7-days", hash: () => "#/?spend=10080", ready: "#spend-table" },
    { name: "job-queued", hash: () => `#/jobs/${seeded.queued[0]}`, ready: '#job-state[data-state="queued"]' },
    { name: "job-running", hash: () => `#/jobs/${seeded.running[0]}`, ready: '#job-lease[data-lapsed="false"]' },
    { name: "job-running-lapsed", hash: () => `#/jobs/${seeded.lapsed[0]}`, ready: '#job-lease[data-lapsed="true"]' },
    { name: "job-succeeded", hash: () => `#/jobs/${seeded.succeeded[0]}`, ready: '#job-state[data-state="succeeded"]' },
    { name: "job-failed", hash: () => `#/jobs/${seeded.failed[0]}`, ready: '#job-state[data-state="failed"]' },
    { name: "job-abandoned", hash: () => `#/jobs/${seeded.abandoned[0]}`, ready: '#job-state[data-state="abandoned"]' },
    { name: "job-missing", hash: () => "#/jobs/01900000-0000-7000-8000-000000000000", ready: "#job-missing" },
    { name: "dead-letters", hash: () => "#/dead-letters", ready: "#groups-table" },
    { name: "resources", hash: () => "#/resources", ready: "#resources-table" },
    { name: "schedules", hash: () => "#/schedules", ready: "#schedules-table" },
    { name: "search", hash: () => `#/search?id=${seeded.failed[0]!.slice(0, 6)}`, ready: "#search-message" },
    { name: "not-found", hash: () => "#/nowhere", ready: "#not-found" }
  ]

  for (const [width, height] of [
    [1280, 800],
    [1920, 1080]
  ] as const) {
    it(`every view at ${width}x${height}: no sideways scrolling, ids and times on one line (screenshots)`, async () => {
      const view = await browser.newPage({ viewport: { width, height } })
      const problems: Array<string> = []
      view.on("pageerror", (error) => problems.push(error.message))
      try {
        for (const { name, hash, ready } of views) {
          await view.goto(`${server.url}/${hash()}`)
          await view.locator(ready).first().waitFor()
          await expect.poll(() => view.textContent("#conn"), { message: name }).toBe("live")
          const size = await overflow(view)
          expect(size.scrollWidth, `${name} at ${width}px`).toBeLessThanOrEqual(size.clientWidth)
          expect(await wrapped(view, "table a.mono, table time, table td.num, .state"), name).toEqual([])
          await view.screenshot({ path: `${shots}views/${name}-${width}x${height}.png`, fullPage: true })
        }
        expect(problems).toEqual([])
      } finally {
        await view.close()
      }
    })
  }
})

describe("dashboard: money, replay from a job's page, cost of retried attempts", () => {
  let server: Running
  let browser: Browser
  let page: Page

  beforeAll(async () => {
    server = await start(memoryBackend(), { queue: "money" })
    browser = await launchChromium()
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  })
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })
  const submit = async (body: Record<string, unknown>) =>
    (await (await post(server.url, "/v1/jobs", body)).json()) as any

  it("shows amounts as money, by the rule the server's View.money states", async () => {
    const job = await submit({ type: "test.work", input: { text: "dear" } })
    const claimed = await server.run(claim(job.id))
    await server.run(
      Effect.flatMap(Store.Store, (store) =>
        store.charge({
          items: [
            { jobId: claimed.id, callId: "big", token: claimed.leaseToken, amountCents: 1000, settled: true },
            { jobId: claimed.id, callId: "small", token: claimed.leaseToken, amountCents: 0.4, settled: true }
          ]
        })
      )
    )
    await page.goto(`${server.url}/#/jobs/${job.id}`)
    await expect.poll(() => page.locator("#charges tbody tr").count()).toBe(2)
    expect(await page.locator("#charges tbody td.num span").allTextContents()).toEqual(["$10.00", "$0.004"])
    expect(await page.textContent("#job-cost")).toBe("$10.004")
    expect(await page.locator("#charges tbody td.num span").first().getAttribute("title")).toBe("1000¢")
    const cents = [0, 0.01, 0.4, 2.5, 3, 99.5, 1000, 123456, 1.23456789, 0.00001, -250]
    expect(await page.evaluate(`${JSON.stringify(cents)}.map(fmtMoney)`)).toEqual(cents.map(money))
  })

  it("a failed job's page has a Replay button that queues the job again", async () => {
    const job = await submit({ type: "test.work", input: { text: "poison" } })
    await server.run(failJob(job.id, "auth", 1))
    await page.goto(`${server.url}/#/jobs/${job.id}`)
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("failed")
    expect(await page.locator("#cancel").count()).toBe(0)
    await page.getByRole("button", { name: "Replay" }).click()
    await expect.poll(() => page.textContent("#job-action-status")).toMatch(/^Replayed: the job is queued again/)
    await expect.poll(() => page.locator("#job-state").getAttribute("data-state")).toBe("queued")
    expect(await page.locator("#replay-job").count()).toBe(0)
    const current = await server.run(Effect.flatMap(Query, (query) => query.get({ jobId: job.id as JobId })))
    expect(current.state).toBe("queued")
  })

  it("Cost by error class keeps what a retried attempt cost after the job succeeded", async () => {
    const job = await submit({ type: "test.work", input: { text: "flaky" } })
    const first = await server.run(claim(job.id))
    await server.run(charge(first, 5))
    await server.run(settle(first, { _tag: "Retry", delayMs: 0, errorClass: "timeout", error: "timed out" }))
    const second = await server.run(claim(job.id))
    await server.run(charge(second, 3))
    await server.run(settle(second, { _tag: "Complete", result: null }))
    await page.goto(`${server.url}/#/`)
    const timeout = page.locator('#cost-table tr[data-error-class="timeout"]')
    await timeout.waitFor()
    expect(await timeout.locator("td.num").textContent()).toBe("$0.05")
  })
})

describe("dashboard: dead letters by input, replay that asks first, the job's input", () => {
  let server: Running
  let browser: Browser
  let page: Page
  /** The dead letters made in `beforeAll`: by group, in the order of their cost. */
  const made = {
    groups: [] as Array<{ errorClass: ErrorClass; input: Json; ids: Array<string> }>,
    singles: [] as Array<string>
  }

  /** A dead letter of `errorClass` whose one attempt was charged `cents`. */
  const deadLetter = (jobId: string, errorClass: ErrorClass, cents: number) =>
    Effect.gen(function* () {
      const job = yield* claim(jobId)
      yield* charge(job, cents)
      return yield* settle(job, {
        _tag: "Fail",
        errorClass,
        error: `HTTP 400 from provider: ${errorClass} for this input`
      })
    })
  const submit = async (input: Json) =>
    ((await (await post(server.url, "/v1/jobs", { type: "test.work", input })).json()) as any).id as string
  const states = (ids: ReadonlyArray<string>) =>
    server.run(
      Effect.forEach(ids, (jobId) =>
        Effect.map(
          Effect.flatMap(Query, (query) => query.get({ jobId: jobId as JobId })),
          (job) => job.state
        )
      )
    )

  beforeAll(async () => {
    server = await start(memoryBackend(), { queue: "dead-letters" })
    browser = await launchChromium()
    // 27 inputs that failed twice each, dearer first; then 5 inputs that failed once each (one collapsed group).
    for (let i = 0; i < 27; i++) {
      const errorClass: ErrorClass = i % 2 === 0 ? "content_filtered" : "context_length"
      const input: Json = {
        prompt: `summarise document ${i} ${"with a long text ".repeat(12)}`,
        apiKey: `sk-live-${i}0123456789abcdef`
      }
      const ids = [await submit(input), await submit(input)]
      for (const id of ids) await server.run(deadLetter(id, errorClass, 100 - i))
      made.groups.push({ errorClass, input, ids })
    }
    for (let i = 0; i < 5; i++) {
      const id = await submit({ prompt: `one-off ${i}` })
      await server.run(deadLetter(id, "rate_limited", 1))
      made.singles.push(id)
    }
  })
  beforeEach(async () => {
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  })
  afterEach(async () => {
    await page?.close()
  })
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  /** The bodies of the replay requests the page sends. */
  const replayRequests = (view: Page) => {
    const bodies: Array<Record<string, unknown>> = []
    view.on("request", (request) => {
      if (request.url().endsWith("/v1/dead-letters/replay")) bodies.push(JSON.parse(request.postData() ?? "{}"))
    })
    return bodies
  }
  const rows = () => page.locator("#groups-table tbody tr")

  it("shows each group's sample input and last error, collapsed singletons, largest cost first, page by page", async () => {
    await page.goto(`${server.url}/#/dead-letters`)
    await expect.poll(() => rows().count()).toBe(25)
    expect(await page.textContent("#dl-summary")).toBe(
      `59 dead letters in 28 groups, ${money(made.groups.reduce((sum, _, i) => sum + 2 * (100 - i), 0) + 5)} spent on them; the groups with the largest cost first.`
    )
    expect(await page.textContent("#groups-label")).toBe("groups 1–25 of 28")
    const first = rows().nth(0)
    expect(await first.getAttribute("data-error-class")).toBe("content_filtered")
    // The sample is the input as the API delivers it: compact JSON, redacted, whole in the tooltip.
    const sample = await first.locator("td").nth(1).locator("span").getAttribute("title")
    expect(JSON.parse(sample!)).toEqual({ ...(made.groups[0]!.input as object), apiKey: "[redacted]" })
    expect(await page.content()).not.toContain("0123456789abcdef")
    expect(await first.locator("td").nth(2).textContent()).toBe(
      "HTTP 400 from provider: content_filtered for this input"
    )
    expect(await first.locator("td.num").nth(0).textContent()).toBe("2")
    expect(await first.locator("td.num").nth(1).textContent()).toBe("$2.00")

    await page.locator("#groups-next").click()
    await expect.poll(() => page.textContent("#groups-label")).toBe("groups 26–28 of 28")
    expect(await rows().count()).toBe(3)
    expect(new URL(page.url()).hash).toMatch(/^#\/dead-letters\?cursor=[\w-]+&page=2$/)
    const collapsed = page.locator('#groups-table tr[data-collapsed="true"]')
    expect(await collapsed.locator("td").nth(0).textContent()).toBe("rate_limited")
    expect(await collapsed.locator("td").nth(1).textContent()).toBe("5 inputs, one job each")
    expect(await page.locator("#groups-next").isDisabled()).toBe(true)
    await page.locator("#groups-previous").click()
    await expect.poll(() => page.textContent("#groups-label")).toBe("groups 1–25 of 28")

    // By count: the collapsed group of five first.
    await page.locator("#sort-count").click()
    await expect.poll(() => rows().first().getAttribute("data-collapsed")).toBe("true")
    expect(new URL(page.url()).hash).toBe("#/dead-letters?sort=count")
    const size = await overflow(page)
    expect(size.scrollWidth).toBeLessThanOrEqual(size.clientWidth)
    await page.screenshot({ path: `${shots}dead-letters-groups.png`, fullPage: true })
  })

  it("a group's replay asks first, then replays exactly that group: its input, or its jobs when collapsed", async () => {
    const sent = replayRequests(page)
    // By count: the collapsed group of five, then the groups of two, dearest first.
    await page.goto(`${server.url}/#/dead-letters?sort=count`)
    const target = made.groups[0]!
    const row = page.locator("#groups-table tbody tr").filter({ hasText: "summarise document 0 " })
    await row.waitFor()
    await row.getByRole("button").click()
    await page.locator("#replay-dialog").waitFor()
    expect(await page.textContent("#replay-question")).toBe(
      "Replay 2 jobs? (the 2 content_filtered dead letters of one input)"
    )
    expect(await page.textContent("#replay-estimate")).toBe("$2.00")
    expect(await states(target.ids)).toEqual(["failed", "failed"])
    await page.locator("#replay-confirm-yes").click()
    await expect.poll(() => page.textContent("#replay-status")).toBe("Replayed 2 of 2.")
    expect(await states(target.ids)).toEqual(["queued", "queued"])
    expect(await states(made.groups[1]!.ids)).toEqual(["failed", "failed"])
    const inputHash = await server.run(
      Effect.map(
        Effect.flatMap(Query, (query) => query.get({ jobId: target.ids[0] as JobId })),
        (job) => job.inputHash
      )
    )
    expect(sent).toEqual([
      { errorClass: "content_filtered", inputHash, dryRun: true },
      { errorClass: "content_filtered", inputHash }
    ])

    const collapsed = page.locator('#groups-table tr[data-collapsed="true"]')
    await collapsed.getByRole("button").click()
    await page.locator("#replay-dialog").waitFor()
    expect(await page.textContent("#replay-question")).toBe(
      "Replay 5 jobs? (the 5 rate_limited dead letters whose inputs failed only once)"
    )
    await page.locator("#replay-confirm-yes").click()
    await expect.poll(() => page.textContent("#replay-status")).toBe("Replayed 5 of 5.")
    expect(await states(made.singles)).toEqual(Array(5).fill("queued"))
    expect((sent[2]!.ids as Array<string>).sort()).toEqual([...made.singles].sort())
  })

  it("Replay all asks first with the count and estimated spend, then replays everything in one request", async () => {
    const sent = replayRequests(page)
    await page.goto(`${server.url}/#/dead-letters`)
    await expect.poll(() => rows().count()).toBeGreaterThan(0)
    // Whatever is failed now (the other tests may have replayed some): each was charged once, so re-running it once
    // is estimated at what it cost.
    const dead = await server.run(Effect.flatMap(Query, (query) => query.list({ state: "failed", limit: null })))
    const failed = dead.map((job) => job.id)
    expect(failed.length).toBeGreaterThan(25)

    // Asked, then declined: only the dry run went out, and nothing moved.
    await page.locator("#replay-all").click()
    await page.locator("#replay-dialog").waitFor()
    expect(await page.textContent("#replay-question")).toBe(`Replay ${failed.length} jobs? (every dead letter)`)
    expect(await page.textContent("#replay-estimate")).toBe(money(dead.reduce((sum, job) => sum + job.costCents, 0)))
    await page.screenshot({ path: `${shots}dead-letters-replay-all-confirm.png`, fullPage: true })
    await page.locator("#replay-confirm-no").click()
    await expect.poll(() => page.textContent("#replay-status")).toBe("Not replayed.")
    expect(sent).toEqual([{ all: true, dryRun: true }])
    expect(new Set(await states(failed))).toEqual(new Set(["failed"]))

    // Asked again and confirmed with the keyboard: one request, and every dead letter is queued again.
    await page.locator("#replay-all").focus()
    await page.keyboard.press("Enter")
    await page.locator("#replay-dialog").waitFor()
    expect(await page.evaluate("document.activeElement?.id")).toBe("replay-confirm-yes")
    await page.keyboard.press("Enter")
    await expect.poll(() => page.textContent("#replay-status")).toBe(`Replayed ${failed.length} of ${failed.length}.`)
    expect(sent).toEqual([{ all: true, dryRun: true }, { all: true, dryRun: true }, { all: true }])
    expect(new Set(await states(failed))).toEqual(new Set(["queued"]))
    await expect.poll(() => page.locator("#groups").textContent()).toBe("No dead letters. Nothing has failed for good.")
    expect(await page.locator("#replay-all").isDisabled()).toBe(true)
  })

  it("a job's page shows its input: the JSON as delivered (redacted), else the preview or the reference", async () => {
    const input = { prompt: "summarise this", nested: { apiKey: "sk-live-abcdefabcdefabcdef", n: [1, 2] } }
    const small = await submit(input)
    const view = (await (await fetch(`${server.url}/v1/jobs/${small}`)).json()) as any
    await page.goto(`${server.url}/#/jobs/${small}`)
    await page.locator("#job-input").waitFor()
    expect(await page.textContent("#job-input")).toBe(JSON.stringify(view.input, null, 2))
    expect(await page.textContent("#job-input")).toContain('"apiKey": "[redacted]"')
    expect(await page.content()).not.toContain("abcdefabcdef")
    await page.screenshot({ path: `${shots}job-input.png`, fullPage: true })

    const large = await submit({ text: "x".repeat(20_000) })
    await page.goto(`${server.url}/#/jobs/${large}`)
    await page.locator("#job-input").waitFor()
    expect(await page.textContent("#job-input")).toMatch(/^\{"text":"x+…$/)
    expect(await page.textContent("#job-input + p")).toBe("Truncated: the input is larger than the page shows.")

    const byRef = (
      (await (
        await post(server.url, "/v1/jobs", { type: "test.work", inputRef: "s3://bucket/inputs/42.json" })
      ).json()) as any
    ).id
    await page.goto(`${server.url}/#/jobs/${byRef}`)
    await page.locator("#job-input-ref").waitFor()
    expect(await page.textContent("#job-input-ref")).toBe("s3://bucket/inputs/42.json")
  })
})
