/**
 * `slowcall serve` with tokens, run as a user runs it: a tokens file of two tenants (hashes only), the memory store.
 * An unauthenticated request gets 401, a tenant reading another tenant's job 404, and the CLI's `jobs` commands
 * work with `SLOWCALL_TOKEN`; only the `--operator` tenant changes a resource. Without tokens, a non-loopback address is refused before anything binds.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Auth from "@slowcall/http/Auth"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname

const slowcall = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      }
    )
  })

describe("slowcall serve --tokens-file", () => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-auth-"))
  const tokenA = Auth.makeToken()
  const tokenB = Auth.makeToken()
  const tokensFile = join(dir, "tokens")
  let child: ChildProcess
  let url: string
  let output = ""

  beforeAll(async () => {
    writeFileSync(tokensFile, `# tenant  hash\nacme ${Auth.hashToken(tokenA)}\nbeta ${Auth.hashToken(tokenB)}\n`)
    child = spawn(
      process.execPath,
      [
        bin,
        "serve",
        "--memory",
        "--port",
        "0",
        "--job-type",
        "test.work",
        "--tokens-file",
        tokensFile,
        "--operator",
        "acme"
      ],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    child.stderr!.on("data", (chunk) => {
      output += chunk
    })
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 50_000)
      child.stdout!.on("data", (chunk) => {
        output += chunk
        const match = /slowcall is serving (http:\/\/[^/\s]+)\//.exec(output)
        if (match && output.includes("authentication:")) {
          clearTimeout(timer)
          resolve(match[1]!)
        }
      })
      child.on("exit", (code) => reject(new Error(`serve exited with ${code}:\n${output}`)))
    })
  })

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGINT")
      const forced = setTimeout(() => child.kill("SIGKILL"), 20_000)
      await exited
      clearTimeout(forced)
    }
    rmSync(dir, { recursive: true, force: true })
  })

  const submit = (headers: Record<string, string>) =>
    fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ type: "test.work", input: { n: 1 } })
    })

  it("--operator: only the operator tenant's token changes a resource; the CLI sends it from SLOWCALL_TOKEN", async () => {
    const refused = await slowcall(
      ["resources", "set", "openai:gpt-4.1:key-a", "--max-concurrent", "3", "--url", url],
      { SLOWCALL_TOKEN: tokenB, NO_COLOR: "1" }
    )
    expect(refused.code).toBe(1)
    expect(refused.stderr.trim()).toBe(
      "slowcall: PUT /v1/resources/openai%3Agpt-4.1%3Akey-a/limits failed: operator_required"
    )
    const set = await slowcall(
      ["resources", "set", "openai:gpt-4.1:key-a", "--max-concurrent", "3", "--json", "--url", url],
      { SLOWCALL_TOKEN: tokenA }
    )
    expect(set.code, set.stderr).toBe(0)
    expect(JSON.parse(set.stdout).resource.limits).toEqual({ maxConcurrent: 3 })
    // Every tenant reads.
    const list = await slowcall(["resources", "list", "--json", "--url", url], { SLOWCALL_TOKEN: tokenB })
    expect(JSON.parse(list.stdout).resources.map((r: any) => r.resource)).toEqual(["openai:gpt-4.1:key-a"])
  })

  it("says authentication is on, answers 401 without a valid token, 404 for another tenant's job", async () => {
    expect(output).toContain("authentication: bearer tokens for 2 tenant(s)")
    expect(output).not.toContain(tokenA)
    const anonymous = await submit({})
    expect(anonymous.status).toBe(401)
    expect(anonymous.headers.get("www-authenticate")).toBe("Bearer")
    expect((await submit({ authorization: `Bearer ${tokenA.slice(0, -1)}` })).status).toBe(401)
    expect((await fetch(`${url}/v1/stats`)).status).toBe(401)
    expect((await fetch(`${url}/metrics`)).status).toBe(401)

    const created = await submit({ authorization: `Bearer ${tokenA}` })
    expect(created.status).toBe(202)
    const job = (await created.json()) as { id: string }
    expect((await fetch(`${url}/v1/jobs/${job.id}`, { headers: { authorization: `Bearer ${tokenA}` } })).status).toBe(
      200
    )
    expect((await fetch(`${url}/v1/jobs/${job.id}`, { headers: { authorization: `Bearer ${tokenB}` } })).status).toBe(
      404
    )
    // The dashboard needs no token to load; it sends the one typed into its field.
    expect((await fetch(`${url}/`)).status).toBe(200)
  })

  it("the CLI talks to it with SLOWCALL_TOKEN; without it, one error line", async () => {
    const job = (await (await submit({ authorization: `Bearer ${tokenA}` })).json()) as { id: string }
    const got = await slowcall(["jobs", "get", job.id, "--json", "--url", url], { SLOWCALL_TOKEN: tokenA })
    expect(got.code, got.stderr).toBe(0)
    expect(JSON.parse(got.stdout)).toMatchObject({ id: job.id, state: "queued" })
    const other = await slowcall(["jobs", "get", job.id, "--url", url], { SLOWCALL_TOKEN: tokenB })
    expect(other.code).not.toBe(0)
    expect(other.stderr.trim()).toMatch(/^slowcall: GET \/v1\/jobs\/\S+ failed: not_found$/)
    const anonymous = await slowcall(["jobs", "list", "--url", url], { SLOWCALL_TOKEN: "" })
    expect(anonymous.stderr.trim()).toBe("slowcall: GET /v1/jobs failed: unauthorized")
  })
})

describe("slowcall serve without tokens", () => {
  it("refuses a non-loopback address unless --allow-unauthenticated, before binding anything", async () => {
    const refused = await slowcall(["serve", "--memory", "--port", "0", "--host", "0.0.0.0"], { SLOWCALL_TOKENS: "" })
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe("")
    expect(refused.stderr.trim().split("\n")).toEqual([
      "slowcall: refusing to serve 0.0.0.0 without authentication: give --tokens-file (or SLOWCALL_TOKENS), or " +
        "--allow-unauthenticated to open the API to anyone who can reach it"
    ])
    const badTokens = await slowcall(["serve", "--memory", "--port", "0"], { SLOWCALL_TOKENS: "acme plaintext" })
    expect(badTokens.code).toBe(1)
    expect(badTokens.stderr.trim()).toBe(
      'slowcall: SLOWCALL_TOKENS: entry 1: expected "<tenant> sha256:<64 hex digits>"'
    )
  })
})
