/**
 * Every pending changeset parses as the changesets tool reads it: front matter naming at least one workspace package
 * with a bump type, then a summary. A Markdown formatter can turn the front matter's last line into a heading (a
 * line followed by `---` is a setext heading), after which `changeset version` rejects the file; this test fails then.
 */
import { readdirSync, readFileSync } from "node:fs"
import parse from "@changesets/parse"
import { describe, expect, it } from "@effect/vitest"

const root = new URL("../../../", import.meta.url)
const changesetDir = new URL(".changeset/", root)
const workspace = (await import(new URL("scripts/workspace.mjs", root).href)) as {
  readonly publicPackages: () => ReadonlyArray<{ readonly name: string }>
}

const pending = readdirSync(changesetDir).filter((file) => file.endsWith(".md") && file !== "README.md")

describe("changesets", () => {
  it("there are pending changesets to check", () => {
    expect(pending.length).toBeGreaterThan(0)
  })

  it.each(pending)("%s parses, names public workspace packages with a bump type, and has a summary", (file) => {
    const parsed = parse(readFileSync(new URL(file, changesetDir), "utf8"))
    const names = new Set(workspace.publicPackages().map((pkg) => pkg.name))
    expect(parsed.releases.length).toBeGreaterThan(0)
    for (const release of parsed.releases) {
      expect(names.has(release.name), `${release.name} is a public workspace package`).toBe(true)
      expect(["major", "minor", "patch"]).toContain(release.type)
    }
    expect(parsed.summary.trim().length).toBeGreaterThan(0)
  })
})
