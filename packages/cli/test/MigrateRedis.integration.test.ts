/**
 * `slowcall migrate --redis-url` on a Redis of this test's own (port 6391, an append-only file in a temporary
 * directory): with `appendfsync everysec` it says that a machine crash can lose up to a second of acknowledged jobs
 * and names `appendfsync always`; with `always` it says nothing acknowledged is lost.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { slowcall } from "./processes.js"

const port = 6391
const url = `redis://127.0.0.1:${port}`
const dir = mkdtempSync(join(tmpdir(), "slowcall-migrate-redis-"))
let server: ChildProcess

const redisCli = (...args: ReadonlyArray<string>) =>
  execFileSync("redis-cli", ["-p", String(port), ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
const pong = () => {
  try {
    return redisCli("ping").trim() === "PONG"
  } catch {
    return false
  }
}

beforeAll(async () => {
  server = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec"],
    { stdio: "ignore" }
  )
  for (let i = 0; i < 100 && !pong(); i++) await new Promise((resolve) => setTimeout(resolve, 100))
  expect(pong()).toBe(true)
})

afterAll(async () => {
  const exited = new Promise((resolve) => server.once("exit", resolve))
  server.kill("SIGKILL")
  await exited
  rmSync(dir, { recursive: true, force: true })
})

describe("slowcall migrate on Redis with an append-only file", () => {
  it("everysec: states the machine-crash loss and the setting that loses nothing", async () => {
    const text = await slowcall(["migrate", "--redis-url", url])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain("appendonly yes, appendfsync everysec")
    expect(text.stdout).toContain("a crash of the machine (power loss, kernel panic) can lose up to a second")
    expect(text.stdout).toContain("appendfsync always loses none of them")
    expect(text.stdout).not.toContain("keep acknowledged jobs, attempts and charges across a restart")
    const json = JSON.parse((await slowcall(["migrate", "--redis-url", url, "--json"])).stdout)
    expect(json.durability).toHaveLength(1)
    expect(json.warnings).toEqual([])
  })

  it("always: nothing acknowledged is lost", async () => {
    expect(redisCli("config", "set", "appendfsync", "always").trim()).toBe("OK")
    const text = await slowcall(["migrate", "--redis-url", url])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain("loses no acknowledged job, attempt or charge")
    expect(text.stdout).not.toContain("up to a second")
  })
})
