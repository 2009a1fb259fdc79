/**
 * The AI SDK snippet of docs/guide/providers.md runs as a reader pastes it: a Promise worker on the in-memory backend
 * whose handler calls `generateText` through `withAiSdk`, charged the cost of the usage the provider reported.
 */
import { spawn } from "node:child_process"
import { createRequire } from "node:module"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..", "..", "..")
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

/** Runs one script with tsx to its end, without blocking this test worker. */
const run = (file: string) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((done, reject) => {
    const child = spawn(process.execPath, ["--import", tsx, file], { cwd: root })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000)
    child.on("error", reject)
    child.on("close", (status) => {
      clearTimeout(timer)
      done({ status, stdout, stderr })
    })
  })

describe("docs/snippets/ai-sdk.ts", () => {
  it("runs a job to success, charged the cost of the reply's usage, and exits 0", async () => {
    const { status, stderr, stdout } = await run(resolve(root, "docs/snippets/ai-sdk.ts"))
    expect(stderr).not.toMatch(/Error/)
    expect(status).toBe(0)
    expect(stdout.trim()).toBe("succeeded { text: 'Bonjour' } 0.0345 cents")
  }, 100_000)
})
