/**
 * Test support for the dashboard's views in a real browser: Debian's Chromium through playwright-core, the in-memory
 * backend they serve, the server and one page opened before a file's tests, and the folder screenshots go to.
 */
import { mkdirSync } from "node:fs"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
import { type Browser, chromium, type Page } from "playwright-core"
import type * as Server from "../src/Server.js"
import { type Running, start } from "./harness.js"

/** Where screenshots go: test-output/dashboard/ at the repository's root. */
export const shots = new URL("../../../test-output/dashboard/", import.meta.url).pathname

const chromiumFlags = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** How long an expectation on a view waits: the views read the API every second. */
export const poll = { timeout: 5_000 }

/** Debian's Chromium, headless, with the flags that keep it quiet and working in a container. */
export const launchChromium = () => chromium.launch({ executablePath: "/usr/bin/chromium", args: chromiumFlags })

/** Every service the server needs, in memory; a new one per call, so each server has a store of its own. */
export const memoryBackend = () =>
  Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)

/** A server, the browser and one page of 1366x900, as a file's tests share them. */
export interface Dashboard {
  readonly server: Running
  readonly browser: Browser
  readonly page: Page
  /** Closes the browser, then the server. */
  readonly close: () => Promise<void>
}

/**
 * Starts a server on a memory backend (with `options`) and Chromium with one page, having made the screenshots'
 * folder. Nothing is left running when it fails: a server whose browser did not start is closed.
 */
export const openDashboard = async (options: Partial<Server.Options> = {}): Promise<Dashboard> => {
  mkdirSync(shots, { recursive: true })
  const server = await start(memoryBackend(), options)
  let browser: Browser | undefined
  try {
    browser = await launchChromium()
    const page = await browser.newPage({ viewport: { width: 1366, height: 900 } })
    const opened = browser
    return {
      server,
      browser: opened,
      page,
      close: async () => {
        await opened.close()
        await server.close()
      }
    }
  } catch (error) {
    await browser?.close()
    await server.close()
    throw error
  }
}
