/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core): a job submitted through the API
 * appears and changes state live, the job page shows attempts, charges and the timeline, and a group of dead
 * letters is replayed from the page with the keyboard. Screenshots go to test-output/dashboard/.
 */
import { mkdirSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Effect, Layer } from "effect"
import { type Browser, chromium, type Page } from "playwright-core"
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
})
