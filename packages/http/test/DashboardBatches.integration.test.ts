/**
 * The dashboard's batch view in a real browser (Debian's Chromium through playwright-core): the list of the batches
 * opened in this browser, and a batch's page with its progress, counts and cost as the store keeps them, refreshed
 * live as items move; its failures grouped by error class, each group replayed after a confirmation that counts it;
 * the whole batch's failed items replayed and the batch cancelled, both asked first; with tokens, another tenant's
 * batch is not found and the list can forget it. Items are driven through the
 * Store (claims, charges, settlements) so the figures on the page are checked against known ones. Screenshots go to
 * test-output/dashboard/.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import { Effect, Either } from "effect"
import type { Browser, Page } from "playwright-core"
import * as Auth from "../src/Auth.js"
import { memoryBackend, openDashboard, poll, shots } from "./browser.js"
import { type Running, start } from "./harness.js"

const post = async (url: string, path: string, body: unknown = {}) => {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  return (await res.json()) as any
}
const getJson = async (url: string, path: string) => (await (await fetch(url + path)).json()) as any

/** One attempt of an item through the Store: claimed, charged `cents` when given, then settled (or left running). */
const run = (id: string, cents: number, outcome: "complete" | { readonly errorClass: ErrorClass } | null) =>
  Effect.gen(function* () {
    const store = yield* Store.Store
    const now = Date.now()
    const jobId = id as JobId
    const claimed = yield* store.claim({ now, items: [{ jobId, owner: "dashboard-test/1", leaseMs: 60_000 }] })
    const result = claimed.results[0]!
    if (result._tag !== "Claimed") return yield* Effect.die(`expected a claim of ${id}, got ${result._tag}`)
    const token = result.job.leaseToken
    if (cents > 0) {
      yield* store.charge({
        now,
        items: [{ jobId, callId: `call-${id}-${token}`, token, amountCents: cents, settled: true }]
      })
    }
    if (outcome === null) return token
    yield* store.settle({
      now,
      items: [
        {
          jobId,
          token,
          outcome:
            outcome === "complete"
              ? { _tag: "Complete", result: { ok: true } }
              : { _tag: "Fail", errorClass: outcome.errorClass, error: `simulated ${outcome.errorClass}` }
        }
      ]
    })
    return token
  })

const count = (page: Page, state: string) => page.textContent(`#batch-count-${state} .n`)
const group = (page: Page, errorClass: string) => page.locator(`tr.failure-group[data-error-class="${errorClass}"]`)

describe("dashboard: the batch view in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page
  let close = async () => {}

  beforeAll(async () => {
    ;({ server, browser, page, close } = await openDashboard())
  })
  afterAll(() => close())

  it("says so when no batch was opened here; an id that is not one is refused", async () => {
    await page.goto(`${server.url}/#/batches`)
    await page.locator("#no-batches").waitFor()
    await expect.poll(() => page.textContent("#conn"), poll).toBe("live")
    expect(await page.locator("#nav-batches").getAttribute("aria-current")).toBe("page")
    await page.fill("#batch-open-id", "import-2026")
    await page.getByRole("button", { name: "Open batch" }).click()
    await expect.poll(() => page.textContent("#batches-status")).toContain("is not a batch id")
  })

  it("follows a batch live: progress, counts, cost against its budget, failures by class replayed after asking", async () => {
    const batch = await post(server.url, "/v1/batches", {
      items: Array.from({ length: 12 }, (_, i) => ({ type: "test.work", input: { doc: i } })),
      budgetCents: 1_000,
      onComplete: { type: "test.work", input: { report: true } }
    })
    const items = (await getJson(server.url, `/v1/batches/${batch.id}/jobs?limit=100`)).jobs.map((j: any) => j.id)
    expect(items).toHaveLength(12)

    // Opened by its id, as one pasted from a submit's answer.
    await page.goto(`${server.url}/#/batches`)
    await page.fill("#batch-open-id", batch.id)
    await page.getByRole("button", { name: "Open batch" }).click()
    await page.waitForURL(`**/#/batches/${batch.id}`)
    await expect.poll(() => page.textContent("#batch-progress .progress-text"), poll).toBe("0 of 12 ended (0%)")
    expect(await count(page, "queued")).toBe("12")
    expect(await page.textContent("#batch-cost")).toBe("$0.00 of a $10.00 budget")
    expect(await page.textContent("#batch-onComplete")).toBe("test.work not enqueued yet")
    expect(await page.locator("#no-batch-failures").count()).toBe(1)
    expect(await page.locator("#batch-items-table tbody tr").count()).toBe(12)

    // Six succeed (2¢ each), three fail content_filtered (1¢ each), two time out (0.5¢ each), one runs.
    const running = await server.run(
      Effect.gen(function* () {
        for (const id of items.slice(0, 6)) yield* run(id, 2, "complete")
        for (const id of items.slice(6, 9)) yield* run(id, 1, { errorClass: "content_filtered" })
        for (const id of items.slice(9, 11)) yield* run(id, 0.5, { errorClass: "timeout" })
        return yield* run(items[11], 0, null)
      })
    )
    await expect.poll(() => page.textContent("#batch-progress .progress-text"), poll).toBe("11 of 12 ended (91.6%)")
    expect(await count(page, "succeeded")).toBe("6")
    expect(await count(page, "failed")).toBe("5")
    expect(await count(page, "running")).toBe("1")
    expect(await page.textContent("#batch-cost")).toBe("$0.16 of a $10.00 budget")
    await group(page, "content_filtered").waitFor()
    expect(await group(page, "content_filtered").locator("td.group-count").textContent()).toBe("3")
    expect(await group(page, "content_filtered").locator("td").nth(2).textContent()).toBe("$0.03")
    expect(await group(page, "timeout").locator("td.group-count").textContent()).toBe("2")
    expect(await group(page, "timeout").locator("td").nth(2).textContent()).toBe("$0.01")
    // The costliest group first.
    expect(await page.locator("tr.failure-group").first().getAttribute("data-error-class")).toBe("content_filtered")
    await page.screenshot({ path: `${shots}batch.png`, fullPage: true })

    // A group's replay asks first, counting it; Cancel sends nothing.
    await group(page, "content_filtered")
      .getByRole("button", { name: /^Replay the 3 content_filtered items/ })
      .click()
    await expect
      .poll(() => page.textContent("#replay-question"))
      .toBe("Replay 3 jobs? (the 3 content_filtered items of this batch)")
    await page.screenshot({ path: `${shots}batch-replay-confirm.png`, fullPage: true })
    await page.click("#replay-confirm-no")
    expect(await page.textContent("#replay-status")).toBe("Not replayed.")
    expect((await getJson(server.url, `/v1/batches/${batch.id}`)).counts.failed).toBe(5)

    await group(page, "content_filtered")
      .getByRole("button", { name: /^Replay the 3 content_filtered items/ })
      .click()
    await page.click("#replay-confirm-yes")
    await expect.poll(() => page.textContent("#replay-status")).toBe("Replayed 3 of 3.")
    const replayed = await getJson(server.url, `/v1/batches/${batch.id}`)
    expect(replayed.counts).toEqual({ queued: 3, running: 1, succeeded: 6, failed: 2, abandoned: 0 })
    await expect.poll(() => group(page, "content_filtered").count(), poll).toBe(0)
    expect(await group(page, "timeout").count()).toBe(1)
    await expect.poll(() => count(page, "queued"), poll).toBe("3")

    // The rest end: the batch finishes with two failures and enqueues its callback once; the page links it.
    await server.run(
      Effect.gen(function* () {
        for (const id of items.slice(6, 9)) yield* run(id, 1, "complete")
        const store = yield* Store.Store
        yield* store.settle({
          now: Date.now(),
          items: [{ jobId: items[11] as JobId, token: running, outcome: { _tag: "Complete", result: null } }]
        })
      })
    )
    await expect.poll(() => page.getAttribute("#batch-state", "data-state"), poll).toBe("finished")
    const finished = await getJson(server.url, `/v1/batches/${batch.id}`)
    expect(finished.onComplete.jobId).not.toBeNull()
    expect(await page.getAttribute("#batch-onComplete a", "href")).toBe(`#/jobs/${finished.onComplete.jobId}`)
    expect(await page.textContent("#batch-progress .progress-text")).toBe("12 of 12 ended (100%)")
    expect(await page.textContent("#batch-cost")).toBe("$0.19 of a $10.00 budget")
    expect(await page.locator("#batch-cancel").isHidden()).toBe(true)

    // The whole batch's failed items: asked first, then the batch's own replay route.
    await page.click("#batch-replay")
    await expect
      .poll(() => page.textContent("#replay-question"))
      .toBe("Replay 2 jobs? (the failed items of this batch)")
    await page.click("#replay-confirm-yes")
    await expect.poll(() => page.textContent("#replay-status")).toBe("Replayed 2 of 2.")
    const again = await getJson(server.url, `/v1/batches/${batch.id}`)
    expect(again.counts).toEqual({ queued: 2, running: 0, succeeded: 10, failed: 0, abandoned: 0 })
    expect(again.finished).toBe(false)
    await expect.poll(() => page.getAttribute("#batch-state", "data-state"), poll).toBe("running")
    await page.locator("#no-batch-failures").waitFor()

    // The list holds the batch opened here, with its progress.
    await page.click("#nav-batches")
    const row = page.locator(`tr.batch[data-batch="${batch.id}"]`)
    await row.waitFor()
    expect(await row.locator(".progress-text").textContent()).toBe("10 of 12 ended (83.3%)")
    expect(await row.getAttribute("data-state")).toBe("running")
    await page.screenshot({ path: `${shots}batches.png`, fullPage: true })
  })

  it("cancels a batch after asking: its queued items abandoned, the batch finished", async () => {
    const batch = await post(server.url, "/v1/batches", {
      items: Array.from({ length: 3 }, (_, i) => ({ type: "test.work", input: { other: i } }))
    })
    await page.goto(`${server.url}/#/batches/${batch.id}`)
    await expect.poll(() => count(page, "queued"), poll).toBe("3")
    await page.click("#batch-cancel")
    await expect
      .poll(() => page.textContent("#batch-cancel-question"))
      .toContain("Its 3 queued items are abandoned at once")
    await page.click("#batch-cancel-no")
    expect((await getJson(server.url, `/v1/batches/${batch.id}`)).cancelRequestedAt).toBeNull()
    await page.click("#batch-cancel")
    await page.click("#batch-cancel-yes")
    await expect
      .poll(() => page.textContent("#replay-status"))
      .toBe("Cancelled: 3 queued items abandoned, 0 running asked to stop.")
    await expect.poll(() => page.getAttribute("#batch-state", "data-state"), poll).toBe("cancelled")
    expect(await count(page, "abandoned")).toBe("3")
    expect((await getJson(server.url, `/v1/batches/${batch.id}`)).counts.abandoned).toBe(3)

    // A batch id looked up as a job links to the batch; an unknown batch says so.
    await page.goto(`${server.url}/#/jobs/${batch.id}`)
    await page.locator("#job-missing-batch").click()
    await page.waitForURL(`**/#/batches/${batch.id}`)
    await page.goto(`${server.url}/#/batches/01900000-0000-7000-8000-0000000000aa`)
    await page.locator("#batch-missing").waitFor()
  })

  it("with tokens, a tenant sees its own batches only: another's is not found, and the list can forget it", async () => {
    const acme = Auth.makeToken()
    const globex = Auth.makeToken()
    const tokens = Either.getOrThrow(Auth.parseTokens(`acme ${Auth.hashToken(acme)}\nglobex ${Auth.hashToken(globex)}`))
    const secured = await start(memoryBackend(), { tokens })
    const view = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    const submit = async (token: string) => {
      const res = await fetch(`${secured.url}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ items: [{ type: "test.work", input: { doc: token.slice(0, 6) } }] })
      })
      return ((await res.json()) as any).id as string
    }
    try {
      const own = await submit(acme)
      const other = await submit(globex)
      await view.goto(`${secured.url}/#/batches/${own}`)
      await expect.poll(() => view.textContent("#conn"), poll).toBe("unauthorized: set the API token")
      await view.fill("#token", acme)
      await view.locator("#token").press("Tab")
      await expect.poll(() => count(view, "queued"), poll).toBe("1")
      await view.goto(`${secured.url}/#/batches/${other}`)
      await view.locator("#batch-missing").waitFor()

      // The list: the own batch with its progress; the other one (opened earlier, before the token) not found.
      await view.evaluate(`localStorage.setItem("slowcall.batches", ${JSON.stringify(JSON.stringify([other, own]))})`)
      await view.goto(`${secured.url}/#/batches`)
      const mine = view.locator(`tr.batch[data-batch="${own}"]`)
      await mine.waitFor()
      expect(await mine.locator(".progress-text").textContent()).toBe("0 of 1 ended (0%)")
      const theirs = view.locator(`tr.batch[data-batch="${other}"]`)
      expect(await theirs.getAttribute("data-state")).toBe("missing")
      expect(await theirs.locator("td").nth(1).textContent()).toBe(
        "Not found with this token (another tenant's, or gone)."
      )
      await theirs.getByRole("button", { name: `Forget ${other}` }).click()
      await expect.poll(() => theirs.count(), poll).toBe(0)
      expect(await mine.count()).toBe(1)
    } finally {
      await view.close()
      await secured.close()
    }
  })
})
