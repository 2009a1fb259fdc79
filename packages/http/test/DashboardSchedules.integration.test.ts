/**
 * The dashboard's schedule view in a real browser (Debian's Chromium through playwright-core): each schedule's cron
 * and timezone, its policies, paused or running, the last tick with a link to its job and the next tick, refreshed
 * live as schedulers move it. Pause and Resume change the store's record (what every scheduler of the fleet reads)
 * with one JSON `POST`; with tokens, a tenant that is not an operator is told so and nothing changes. Screenshots go
 * to test-output/dashboard/.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Schedule from "@slowcall/schedules/Schedule"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Either } from "effect"
import type { Browser, Page } from "playwright-core"
import * as Auth from "../src/Auth.js"
import { memoryBackend, openDashboard, poll, shots } from "./browser.js"
import { type Running, start } from "./harness.js"

const nightly = Either.getOrThrow(
  Schedule.make({
    id: "nightly-summary",
    cron: "0 2 * * *",
    timezone: "Europe/Berlin",
    job: { queue: "default", type: "report.summary" },
    catchUp: "latest"
  })
)
const everyTen = Either.getOrThrow(
  Schedule.make({ id: "imports/poll", cron: "*/10 * * * * *", job: { queue: "default", type: "imports.poll" } })
)

const recordOf = (id: string) =>
  Effect.flatMap(ScheduleStore.ScheduleStore, (store) => store.get(id)).pipe(
    Effect.map((reply) => (reply.result._tag === "Found" ? reply.result.record : null))
  )

const row = (page: Page, id: string) => page.locator(`tr.schedule[data-schedule="${id}"]`)

describe("dashboard: the schedule view in Chromium", () => {
  let server: Running
  let browser: Browser
  let page: Page
  let close = async () => {}

  beforeAll(async () => {
    ;({ server, browser, page, close } = await openDashboard())
  })
  afterAll(() => close())

  it("says so when there is no schedule yet", async () => {
    await page.goto(`${server.url}/#/schedules`)
    await page.locator("#no-schedules").waitFor()
    await expect.poll(() => page.textContent("#conn"), poll).toBe("live")
    expect(await page.locator("#nav-schedules").getAttribute("aria-current")).toBe("page")
  })

  it("lists schedules with their next and last ticks, live; the last job links to its page; Pause and Resume", async () => {
    const created = Date.now() - 3 * 86_400_000
    const lastTick = Schedule.nextTick(nightly, created + 86_400_000)!
    const jobId = "01900000-0000-7000-8000-0000000000aa"
    await server.run(
      Effect.gen(function* () {
        const store = yield* ScheduleStore.ScheduleStore
        yield* store.upsert([nightly, everyTen], { now: created })
      })
    )
    await page.goto(`${server.url}/#/schedules`)
    await row(page, "nightly-summary").waitFor()
    expect(await row(page, "nightly-summary").locator("td").nth(1).textContent()).toBe("0 2 * * *Europe/Berlin")
    expect(await row(page, "nightly-summary").locator("td.schedule-state").textContent()).toBe("running")
    expect(await row(page, "nightly-summary").locator("td.last-tick").textContent()).toBe("—")
    const next = await row(page, "nightly-summary").locator("td.next-tick time").getAttribute("datetime")
    expect(Date.parse(next!)).toBe(Schedule.nextTick(nightly, Date.parse(next!) - 1))
    expect(Date.parse(next!)).toBeGreaterThan(Date.now() - 1_000)

    // A scheduler decides a tick and makes its job: the row shows both.
    await server.run(
      Effect.flatMap(ScheduleStore.ScheduleStore, (store) => store.advance("nightly-summary", lastTick, jobId))
    )
    await expect
      .poll(() => row(page, "nightly-summary").locator("td.last-tick time").getAttribute("datetime"), poll)
      .toBe(new Date(lastTick).toISOString())
    expect(await row(page, "nightly-summary").locator("td.last-job a").getAttribute("href")).toBe(`#/jobs/${jobId}`)
    await page.screenshot({ path: `${shots}schedules.png`, fullPage: true })

    await row(page, "imports/poll").getByRole("button", { name: "Pause imports/poll" }).click()
    await expect
      .poll(() => page.textContent("#schedule-status"))
      .toBe("Paused imports/poll: no scheduler makes a job for it until it is resumed.")
    await expect.poll(() => row(page, "imports/poll").getAttribute("data-paused"), poll).toBe("true")
    expect(await row(page, "imports/poll").locator("td.next-tick").textContent()).toBe("—")
    expect((await server.run(recordOf("imports/poll")))?.paused).toBe(true)
    expect((await server.run(recordOf("nightly-summary")))?.paused).toBe(false)
    await page.screenshot({ path: `${shots}schedules-paused.png`, fullPage: true })

    await row(page, "imports/poll").getByRole("button", { name: "Resume imports/poll" }).click()
    await expect.poll(() => row(page, "imports/poll").getAttribute("data-paused"), poll).toBe("false")
    expect((await server.run(recordOf("imports/poll")))?.paused).toBe(false)
  })

  it("with tokens, a tenant that is not an operator sees the view but cannot pause", async () => {
    const operator = Auth.makeToken()
    const tenant = Auth.makeToken()
    const tokens = Either.getOrThrow(
      Auth.parseTokens(`ops ${Auth.hashToken(operator)}\nacme ${Auth.hashToken(tenant)}`)
    )
    const secured = await start(memoryBackend(), { tokens, operators: ["ops"] })
    const view = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    const own = Either.getOrThrow(
      Schedule.make({ id: "acme-digest", cron: "0 * * * *", job: { queue: "default", type: "digest", tenant: "acme" } })
    )
    try {
      await secured.run(Effect.flatMap(ScheduleStore.ScheduleStore, (store) => store.upsert([own, nightly])))
      await view.goto(`${secured.url}/#/schedules`)
      await expect.poll(() => view.textContent("#conn"), poll).toBe("unauthorized: set the API token")
      await view.fill("#token", tenant)
      await view.locator("#token").press("Tab")
      await row(view, "acme-digest").waitFor()
      // Another tenant's schedule is not listed to it.
      expect(await row(view, "nightly-summary").count()).toBe(0)
      await row(view, "acme-digest").getByRole("button", { name: "Pause acme-digest" }).click()
      await expect
        .poll(() => view.textContent("#schedule-status"))
        .toBe("Could not pause acme-digest: only an operator's token may.")
      expect((await secured.run(recordOf("acme-digest")))?.paused).toBe(false)

      await view.fill("#token", operator)
      await view.locator("#token").press("Tab")
      await row(view, "nightly-summary").waitFor()
      await row(view, "acme-digest").getByRole("button", { name: "Pause acme-digest" }).click()
      await expect.poll(() => row(view, "acme-digest").getAttribute("data-paused"), poll).toBe("true")
      expect((await secured.run(recordOf("acme-digest")))?.paused).toBe(true)
    } finally {
      await view.close()
      await secured.close()
    }
  })
})
