/**
 * The packages install and run as a user gets them: every public package is built and packed (scripts/pack.mjs),
 * the quick start named in scripts/quick-start.json is installed from those tarballs into a fresh folder under the
 * OS temp dir (outside the monorepo, so nothing resolves to the workspace's sources), its types stripped with
 * esbuild, and run with plain `node`. Third-party dependencies come from the registry (or npm's cache).
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { transform } from "esbuild"
import { afterAll, describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
const quickStart = JSON.parse(readFileSync(join(root, "scripts", "quick-start.json"), "utf8")) as {
  readonly snippet: string
  readonly packages: ReadonlyArray<string>
  readonly thirdParty: ReadonlyArray<string>
  readonly expect: string
}
type Packed = { readonly name: string; readonly version: string; readonly tarball: string }
const { build, pack } = (await import(new URL("../scripts/pack.mjs", import.meta.url).href)) as {
  readonly build: () => void
  readonly pack: (out: string) => ReadonlyArray<Packed>
}
const { publicPackages } = (await import(new URL("../scripts/workspace.mjs", import.meta.url).href)) as {
  readonly publicPackages: () => ReadonlyArray<{ name: string; manifest: { dependencies?: Record<string, string> } }>
}

/** Runs a command to its end without blocking this worker; rejects with its output when it exits non-zero. */
const exec = (cmd: string, args: ReadonlyArray<string>, cwd: string, timeoutMs: number) =>
  new Promise<string>((done, fail) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, NODE_OPTIONS: "" } })
    let out = ""
    child.stdout.on("data", (c) => {
      out += c
    })
    child.stderr.on("data", (c) => {
      out += c
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("error", fail)
    child.on("close", (status) => {
      clearTimeout(timer)
      if (status === 0) done(out)
      else fail(new Error(`${cmd} ${args.join(" ")} exited ${status}:\n${out}`))
    })
  })

/** The named packages and every sibling package they depend on, transitively. */
const closure = (names: ReadonlyArray<string>): Set<string> => {
  const all = new Map(publicPackages().map((p) => [p.name, p]))
  const seen = new Set<string>()
  const visit = (name: string) => {
    const p = all.get(name)
    if (p === undefined) throw new Error(`scripts/quick-start.json names ${name}, which is not a public package`)
    if (seen.has(name)) return
    seen.add(name)
    for (const dep of Object.keys(p.manifest.dependencies ?? {})) if (all.has(dep)) visit(dep)
  }
  for (const n of names) visit(n)
  return seen
}

const made: Array<string> = []
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true })
})

describe("the packed packages install and run the quick start", () => {
  it("installs from the tarballs outside the monorepo and runs with plain node", async () => {
    const tarballs = mkdtempSync(join(tmpdir(), "slowcall-tarballs-"))
    const app = mkdtempSync(join(tmpdir(), "slowcall-app-"))
    made.push(tarballs, app)
    build()
    const packed = pack(tarballs)
    const wanted = closure(quickStart.packages)
    const files = packed.filter((p) => wanted.has(p.name)).map((p) => p.tarball)
    expect(files.length).toBe(wanted.size)

    const rootManifest = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"))
    const thirdParty = quickStart.thirdParty.map(
      (dep) => `${dep}@${rootManifest.packages[`node_modules/${dep}`].version as string}`
    )
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "quick-start", private: true, type: "module" }))
    await exec("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...files, ...thirdParty], app, 80_000)
    for (const name of wanted) expect(existsSync(join(app, "node_modules", name, "dist", "index.js"))).toBe(true)

    const source = readFileSync(join(root, quickStart.snippet), "utf8")
    // The getting-started promise: a user who knows async/await gets a processed job in under 30 lines.
    expect(source.trimEnd().split("\n").length).toBeLessThan(30)
    const { code } = await transform(source, { loader: "ts", format: "esm", target: "node20" })
    writeFileSync(join(app, "quick-start.mjs"), code)
    const output = await exec(process.execPath, ["quick-start.mjs"], app, 30_000)
    expect(output).toMatch(new RegExp(quickStart.expect))
  }, 120_000)
})
