/**
 * The packaging scripts (scripts/workspace.mjs, scripts/size.mjs): which packages are public, the manifest each one
 * ships with, and the package-size page kept in step with the code. The pack and install themselves are run by
 * examples/quick-starts.test.ts.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

type Manifest = Record<string, any>
type Pkg = { readonly dir: string; readonly name: string; readonly version: string; readonly manifest: Manifest }
const workspace = (await import(new URL("../../../scripts/workspace.mjs", import.meta.url).href)) as {
  readonly publicPackages: () => ReadonlyArray<Pkg>
  readonly publishManifest: (manifest: Manifest, siblings: ReadonlyArray<Pkg>) => Manifest
  readonly ManifestError: new (pkg: string, message: string) => Error
}
const size = (await import(new URL("../../../scripts/size.mjs", import.meta.url).href)) as {
  readonly pagePath: string
  readonly render: () => Promise<string>
}

const base: Manifest = {
  name: "@slowcall/example",
  version: "1.2.3",
  description: "d",
  type: "module",
  sideEffects: false,
  license: "MIT",
  repository: { type: "git", url: "git+https://example.invalid/x.git" },
  engines: { node: ">=20" },
  files: ["dist", "README.md"],
  exports: {
    ".": { types: "./src/index.ts", default: "./src/index.ts" },
    "./*": { types: "./src/*.ts", default: "./src/*.ts" },
    "./internal/*": null
  },
  dependencies: { "@slowcall/core": "1.2.3", effect: "3.22.4" },
  devDependencies: { vitest: "3.2.7" },
  scripts: { test: "vitest" }
}
const siblings = [{ dir: "/x", name: "@slowcall/core", version: "1.2.3", manifest: {} }]

describe("publicPackages", () => {
  it("lists every non-private workspace under packages/, each with the manifest fields a release needs", () => {
    const packages = workspace.publicPackages()
    expect(packages.map((p) => p.name)).toContain("@slowcall/core")
    for (const p of packages) {
      expect(p.manifest.private).not.toBe(true)
      expect(() => workspace.publishManifest(p.manifest, packages)).not.toThrow()
    }
  })
})

describe("publishManifest", () => {
  it("points exports, main and types at dist/, keeps closed entries closed, drops dev-only fields", () => {
    const out = workspace.publishManifest(base, siblings)
    expect(out.exports).toEqual({
      ".": { types: "./dist/index.d.ts", import: "./dist/index.js", default: "./dist/index.js" },
      "./*": { types: "./dist/*.d.ts", import: "./dist/*.js", default: "./dist/*.js" },
      "./internal/*": null
    })
    expect(out.main).toBe("./dist/index.js")
    expect(out.types).toBe("./dist/index.d.ts")
    expect(out.devDependencies).toBeUndefined()
    expect(out.scripts).toBeUndefined()
    expect(out.dependencies).toEqual(base.dependencies)
  })

  it("applies publishConfig fields over their namesakes and keeps npm's own publishConfig keys", () => {
    const out = workspace.publishManifest(
      { ...base, bin: { x: "./bin/dev.mjs" }, publishConfig: { bin: { x: "./bin/dist.mjs" }, access: "public" } },
      siblings
    )
    expect(out.bin).toEqual({ x: "./bin/dist.mjs" })
    expect(out.publishConfig).toEqual({ access: "public" })
  })

  it("refuses a sibling dependency that is not the sibling's exact version", () => {
    const loose = { ...base, dependencies: { "@slowcall/core": "^1.2.3" } }
    expect(() => workspace.publishManifest(loose, siblings)).toThrow(workspace.ManifestError)
    expect(() => workspace.publishManifest(loose, siblings)).toThrow(
      'dependencies.@slowcall/core is "^1.2.3", not the sibling\'s exact version "1.2.3"'
    )
  })

  it("refuses a manifest without a field a release needs", () => {
    const { repository: _r, ...noRepository } = base
    expect(() => workspace.publishManifest(noRepository, siblings)).toThrow('package.json has no "repository"')
  })
})

// The page's text with its figures taken out, and the figures themselves. A figure may differ from today's
// measurement by a rounding step or by 1% (gzip output moves by a few bytes with unrelated edits); more than that,
// or any other difference, means the page is stale.
const figures = /\d+(?:\.\d+)?/g
const shape = (page: string) => page.replace(figures, "#")
const numbers = (page: string) => (page.match(figures) ?? []).map(Number)
const close = (a: number, b: number) => Math.abs(a - b) <= Math.max(0.1, Math.abs(b) * 0.01)

describe("package-size page", () => {
  it("matches what scripts/size.mjs measures now, within 1% per figure (UPDATE_SIZE=1 rewrites it)", async () => {
    const page = await size.render()
    if (process.env.UPDATE_SIZE === "1") writeFileSync(size.pagePath, page)
    const written = readFileSync(size.pagePath, "utf8")
    expect(shape(written)).toBe(shape(page))
    const measured = numbers(page)
    const off = numbers(written).flatMap((n, i) =>
      close(n, measured[i]!) ? [] : [`${n} on the page, ${measured[i]} now`]
    )
    expect(off).toEqual([])
  })

  it("the comparison refuses a figure off by more than 1% and a changed row", () => {
    expect(close(225.0, 224.9)).toBe(true)
    expect(close(230, 224.9)).toBe(false)
    expect(shape("| core | 707.6 KiB |")).not.toBe(shape("| core/Batch | 707.6 KiB |"))
  })
})
