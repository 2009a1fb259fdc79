/**
 * Every package README promises a snippet that runs. Each ```ts block that follows a `<!-- runs -->` line is
 * written next to the repository's sources (so `@slowcall/*` resolves), run with tsx from an empty temporary
 * directory, and must exit 0. A README with no runnable block fails too.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const scratch = join(root, ".scratch", "readme-snippets")

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

  it("the root README's embedding example type-checks", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const block = /## Embedding[\s\S]*?```ts\n([\s\S]*?)\n```/.exec(readme)?.[1]
    expect(block, "README.md has an Embedding ts block").toBeDefined()
    const dir = join(scratch, "root")
    mkdirSync(dir, { recursive: true })
    // The example names the caller's own model call and input; declare them so everything else is checked.
    const declarations = [
      'import type { Effect as E } from "effect"',
      "declare const text: string",
      "declare const callYourModel: (text: string) => E.Effect<{ summary: string; cents: number }>",
      "export {}"
    ].join("\n")
    writeFileSync(join(dir, "embedding.ts"), `${declarations}\n${block}\n`)
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: "../../../tsconfig.base.json",
        compilerOptions: { noEmit: true },
        include: ["embedding.ts"]
      })
    )
    const tsc = spawnSync(process.execPath, [createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", dir], {
      encoding: "utf8",
      timeout: 120_000
    })
    expect(tsc.status, `${tsc.stdout}\n${tsc.stderr}`).toBe(0)
  }, 180_000)

  for (const pkg of packages) {
    it(`@slowcall/${pkg}`, () => {
      const blocks = runnableBlocks(readFileSync(join(root, "packages", pkg, "README.md"), "utf8"))
      expect(blocks.length, `packages/${pkg}/README.md has no <!-- runs --> ts block`).toBeGreaterThan(0)
      mkdirSync(scratch, { recursive: true })
      blocks.forEach((code, i) => {
        const file = join(scratch, `${pkg}-${i}.ts`)
        writeFileSync(file, code)
        const cwd = mkdtempSync(join(tmpdir(), "slowcall-readme-"))
        try {
          const run = spawnSync(process.execPath, ["--import", tsxLoader, file], {
            cwd,
            encoding: "utf8",
            timeout: 90_000,
            env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" }
          })
          expect(run.status, `${pkg} block ${i}:\n${run.stdout}\n${run.stderr}`).toBe(0)
        } finally {
          rmSync(cwd, { recursive: true, force: true })
        }
      })
    }, 180_000)
  }
})
