/**
 * Every package README promises a snippet that runs. Each ```ts block that follows a `<!-- runs -->` line is
 * written next to the repository's sources (so `@slowcall/*` resolves), run with tsx from an empty temporary
 * directory, and must exit 0. A README with no runnable block fails too.
 */
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const scratch = join(root, ".scratch", "readme-snippets")

/**
 * Runs a Node process to its end without blocking this test worker (a blocked worker misses its own runner's
 * heartbeats when a slow machine makes the child take long).
 */
const node = (
  args: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly env?: NodeJS.ProcessEnv; readonly timeoutMs: number }
) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: options.cwd, env: options.env ?? process.env })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs)
    child.on("error", reject)
    child.on("close", (status) => {
      clearTimeout(timer)
      resolve({ status, stdout, stderr })
    })
  })

const runnableBlocks = (markdown: string): Array<string> => {
  const blocks: Array<string> = []
  const re = /<!-- runs -->\s*\n```ts\n([\s\S]*?)\n```/g
  for (const m of markdown.matchAll(re)) blocks.push(m[1]!)
  return blocks
}

// Packages whose issue has not come yet hold only a README line and no code.
const packages = readdirSync(join(root, "packages")).filter((pkg) =>
  readdirSync(join(root, "packages", pkg)).includes("src")
)

describe("package README snippets run", () => {
  it("finds the runnable-block marker (the extractor itself)", () => {
    expect(runnableBlocks("x\n<!-- runs -->\n```ts\nconst a = 1\n```\n```ts\nno\n```")).toEqual(["const a = 1"])
  })

  // The root README's examples run from a fresh install in examples/quick-starts.test.ts; here they are type-checked
  // against the sources, as they are (they define everything they use).
  it("the root README's embedding example type-checks", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const block = /## Embedding[\s\S]*?```ts\n([\s\S]*?)\n```/.exec(readme)?.[1]
    expect(block, "README.md has an Embedding ts block").toBeDefined()
    const dir = join(scratch, "root")
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "embedding.ts"), `${block}\n`)
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: "../../../tsconfig.base.json",
        compilerOptions: { noEmit: true },
        include: ["embedding.ts"]
      })
    )
    const tsc = await node([createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", dir], {
      timeoutMs: 120_000
    })
    expect(tsc.status, `${tsc.stdout}\n${tsc.stderr}`).toBe(0)
  }, 180_000)

  it("the root README's Promise API example type-checks", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const block = /## Without Effect: the Promise API[\s\S]*?```ts\n([\s\S]*?)\n```/.exec(readme)?.[1]
    expect(block, "README.md has a Promise API ts block").toBeDefined()
    const dir = join(scratch, "root-promise")
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "promise.ts"), `${block}\n`)
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: "../../../tsconfig.base.json",
        compilerOptions: { noEmit: true },
        include: ["promise.ts"]
      })
    )
    const tsc = await node([createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", dir], {
      timeoutMs: 120_000
    })
    expect(tsc.status, `${tsc.stdout}\n${tsc.stderr}`).toBe(0)
  }, 180_000)

  for (const pkg of packages) {
    it(`@slowcall/${pkg}`, async () => {
      const blocks = runnableBlocks(readFileSync(join(root, "packages", pkg, "README.md"), "utf8"))
      expect(blocks.length, `packages/${pkg}/README.md has no <!-- runs --> ts block`).toBeGreaterThan(0)
      mkdirSync(scratch, { recursive: true })
      for (const [i, code] of blocks.entries()) {
        const file = join(scratch, `${pkg}-${i}.ts`)
        writeFileSync(file, code)
        const cwd = mkdtempSync(join(tmpdir(), "slowcall-readme-"))
        try {
          const run = await node(["--import", tsxLoader, file], {
            cwd,
            timeoutMs: 90_000,
            env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" }
          })
          expect(run.status, `${pkg} block ${i}:\n${run.stdout}\n${run.stderr}`).toBe(0)
        } finally {
          rmSync(cwd, { recursive: true, force: true })
        }
      }
    }, 180_000)
  }
})
