// Browser test of the docs site: builds it, serves the static output over HTTP, and drives the calculator page
// in Debian's Chromium through playwright-core. Screenshots go to test-output/docs/.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { extname, join, normalize, resolve } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "../..")
const dist = join(root, "docs/.vitepress/dist")
const shots = join(root, "test-output/docs")

const types: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".css": "text/css",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".woff2": "font/woff2",
  ".png": "image/png"
}

/** A tiny static server for the built site: clean URLs fall back to `.html`, unknown paths answer 404. */
const serve = (dir: string): Promise<Server> =>
  new Promise((ready) => {
    const server = createServer((request, response) => {
      const path = decodeURIComponent(new URL(request.url ?? "/", "http://localhost").pathname)
      const candidates = [path, `${path}.html`, join(path, "index.html")].map((p) => normalize(join(dir, p)))
      const file = candidates.find((p) => p.startsWith(dir) && existsSync(p) && statSync(p).isFile())
      if (file === undefined) {
        response.writeHead(404, { "content-type": "text/plain" }).end("not found")
        return
      }
      response.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" })
      response.end(readFileSync(file))
    })
    server.listen(0, "127.0.0.1", () => ready(server))
  })

let server: Server
let browser: Browser
let base: string
const pageErrors: Array<string> = []

beforeAll(async () => {
  const build = spawnSync(process.execPath, [join(root, "node_modules/vitepress/bin/vitepress.js"), "build", "docs"], {
    cwd: root,
    encoding: "utf8"
  })
  if (build.status !== 0) throw new Error(`vitepress build failed:\n${build.stdout}\n${build.stderr}`)
  mkdirSync(shots, { recursive: true })
  server = await serve(dist)
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
}, 240_000)

afterAll(async () => {
  await browser?.close()
  await new Promise<void>((done) => (server ? server.close(() => done()) : done()))
  // Leak check: nothing we started is still running.
  expect(browser?.isConnected() ?? false).toBe(false)
  expect(server?.listening ?? false).toBe(false)
})

const openCalculator = async (): Promise<Page> => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } })
  page.on("pageerror", (error) => pageErrors.push(error.message))
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(`${message.text()} ${message.location().url}`)
  })
  page.on("response", (response) => {
    if (response.status() >= 400) pageErrors.push(`HTTP ${response.status()} ${response.url()}`)
  })
  const response = await page.goto(`${base}/guide/calculator.html`)
  expect(response?.status()).toBe(200)
  await page.getByTestId("p99").waitFor()
  return page
}

describe("docs calculator", () => {
  it("p99 45 s with a 60 s hop shows async", async () => {
    const page = await openCalculator()
    await page.getByTestId("hop-preset-0").selectOption("managed")
    await expect.poll(() => page.getByTestId("hop-timeout-0").inputValue()).toBe("60s")
    await page.getByTestId("p99").fill("45s")
    await expect.poll(() => page.getByTestId("mode").textContent()).toContain("async")
    expect(await page.getByTestId("rule").textContent()).toBe("within-2x")
    expect(await page.getByTestId("reason").textContent()).toContain("within 2x of the shortest hop timeout")
    expect(await page.getByTestId("chart").getAttribute("aria-label")).toBe("p99 45s against T/2 30s and T 1m")
    await page.screenshot({ path: join(shots, "calculator-async.png"), fullPage: true })
    await page.close()
  })

  it("5 s with a 60 s hop and a waiting user shows sync with streaming", async () => {
    const page = await openCalculator()
    await page.getByTestId("hop-preset-0").selectOption("managed")
    await page.getByTestId("p99").fill("5s")
    await page.getByTestId("user-waiting").check()
    await expect.poll(() => page.getByTestId("mode").textContent()).toContain("sync with streaming")
    expect(await page.getByTestId("rule").textContent()).toBe("well-under")
    await page.screenshot({ path: join(shots, "calculator-sync.png"), fullPage: true })

    // The same call when the work outlives the session is async, whatever its speed.
    await page.getByTestId("outlives-session").check()
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("outlives-session")
    expect(await page.getByTestId("mode").textContent()).toContain("async")
    await page.close()
  })

  it("the boundary: exactly half the shortest hop is async, and the shortest of several hops decides", async () => {
    const page = await openCalculator()
    await page.getByTestId("p99").fill("30s")
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("within-2x")
    await page.getByTestId("p99").fill("29999ms")
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("well-under")
    await page.getByTestId("hop-add").click()
    await page.getByTestId("hop-preset-1").selectOption("apigw")
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("within-2x")
    expect(await page.getByTestId("reason").textContent()).toContain("api-gateway (29s)")
    await page.close()
  })

  it("computes the effective p99 from pasted samples and a retry policy", async () => {
    const page = await openCalculator()
    await page.getByTestId("source-samples").check()
    await page.getByTestId("samples").fill(`${"3000\n".repeat(95)}${"45000\n".repeat(5)}`)
    await page.getByTestId("timeout").fill("20s")
    await page.getByTestId("retries").fill("2")
    await page.getByTestId("backoff").fill("0ms")
    await expect.poll(() => page.getByTestId("effective").textContent()).toContain("Effective p99 23s")
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("well-under")
    await page.screenshot({ path: join(shots, "calculator-samples.png"), fullPage: true })
    await page.close()
  })

  it("without hops there is no decision, only a clear message", async () => {
    const page = await openCalculator()
    await page.getByTestId("hop-remove-0").click()
    await expect.poll(() => page.getByTestId("error").textContent()).toContain("no hop timeouts given")
    expect(await page.getByTestId("mode").count()).toBe(0)
    await page.close()
  })

  it("a duration without a unit is refused with a question, in every duration field, never read as ms", async () => {
    // Arrange
    const page = await openCalculator()
    await page.getByTestId("hop-preset-0").selectOption("managed")
    // Act: 45 meant as seconds (async) would read as 45 ms (sync) if it were taken as milliseconds.
    await page.getByTestId("p99").fill("45")
    // Assert
    await expect.poll(() => page.getByTestId("error").textContent()).toBe("p99: 45 what? (45s, 45000ms)")
    expect(await page.getByTestId("mode").count()).toBe(0)
    await page.screenshot({ path: join(shots, "calculator-unitless.png"), fullPage: true })

    await page.getByTestId("p99").fill("45s")
    await page.getByTestId("hop-timeout-0").fill("60")
    await expect
      .poll(() => page.getByTestId("error").textContent())
      .toBe('hop "platform" timeout: 60 what? (60s, 60000ms)')
    await page.getByTestId("hop-timeout-0").fill("60s")
    await expect.poll(() => page.getByTestId("rule").textContent()).toBe("within-2x")

    await page.getByTestId("source-samples").check()
    await page.getByTestId("samples").fill("3000\n4000\n")
    await page.getByTestId("timeout").fill("20")
    await expect.poll(() => page.getByTestId("error").textContent()).toBe("timeout: 20 what? (20s, 20000ms)")
    await page.getByTestId("timeout").fill("20s")
    await page.getByTestId("backoff").fill("1")
    await expect.poll(() => page.getByTestId("error").textContent()).toBe("backoff: 1 what? (1s, 1000ms)")
    await page.getByTestId("backoff").fill("1s")
    await page.getByTestId("fallback").fill("5")
    await expect.poll(() => page.getByTestId("error").textContent()).toBe("fallback p99: 5 what? (5s, 5000ms)")
    await page.getByTestId("fallback").fill("")
    await expect.poll(() => page.getByTestId("mode").count()).toBe(1)
    await page.close()
  })

  it("raised no page errors", () => {
    expect(pageErrors).toEqual([])
  })
})
