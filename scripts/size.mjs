// `npm run size`: how much each entry point of @slowcall/core costs a bundle, and what installing the Promise API
// puts on disk (the figures `npm run size:install` measured, kept in docs/guide/install-size.json). Each entry (every path its `exports`
// map opens: the root and each src/*.ts module) is bundled alone with esbuild (ESM, minified, its dependencies,
// effect included, bundled and tree-shaken), gzipped, and split through esbuild's metafile into slowcall's own
// bytes and its dependencies' bytes. Prints the tables and writes docs/guide/package-size.md.
//
//   node scripts/size.mjs           print and write the page
//   node scripts/size.mjs --print   print only
//
// The page is checked by packages/cli/test/Packaging.test.ts; regenerate it with `npm run size` (or run that test with
// UPDATE_SIZE=1) after changing core or its dependencies.
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { gzipSync } from "node:zlib"
import { build } from "esbuild"
import { root } from "./workspace.mjs"

export const pagePath = join(root, "docs", "guide", "package-size.md")
const installPath = join(root, "docs", "guide", "install-size.json")
const core = join(root, "packages", "core")

/** The entry points a user of @slowcall/core can import: `.` and each public module under src/. */
export const entries = () => [
  { specifier: "@slowcall/core", file: join(core, "src", "index.ts") },
  ...readdirSync(join(core, "src"))
    .filter((f) => f.endsWith(".ts") && f !== "index.ts")
    .sort()
    .map((f) => ({ specifier: `@slowcall/core/${f.replace(/\.ts$/, "")}`, file: join(core, "src", f) }))
]

/** One entry's sizes in bytes: `{ minified, gzip, own }` (`own`: output bytes from slowcall's own sources). */
const measure = async (file) => {
  const result = await build({
    entryPoints: [file],
    bundle: true,
    minify: true,
    write: false,
    metafile: true,
    format: "esm",
    platform: "node",
    target: "node20",
    absWorkingDir: root,
    logLevel: "silent"
  })
  const code = result.outputFiles[0].contents
  const [output] = Object.values(result.metafile.outputs)
  let own = 0
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    if (!input.includes("node_modules/")) own += bytesInOutput
  }
  return { minified: code.length, gzip: gzipSync(code, { level: 9 }).length, own }
}

const kb = (n) => `${(n / 1024).toFixed(1)} KiB`
const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`

/**
 * A Markdown table with its columns padded as the repository's formatter (biome) writes them, so the generated page
 * and the formatted file are the same text: left-aligned columns padded after, right-aligned ones before.
 */
const padded = (header, right, rows) => {
  const widths = header.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => r[i].length)))
  const cell = (text, i) => (right[i] ? text.padStart(widths[i]) : text.padEnd(widths[i]))
  const line = (cells) => `| ${cells.map(cell).join(" | ")} |`
  const rule = `| ${widths.map((w, i) => (right[i] ? `${"-".repeat(w - 1)}:` : "-".repeat(w))).join(" | ")} |`
  return [line(header), rule, ...rows.map(line)]
}

/** The page's Markdown, measured now. */
export const render = async () => {
  const rows = []
  for (const e of entries()) rows.push({ ...e, ...(await measure(e.file)) })
  const table = padded(
    ["entry point", "minified", "gzip", "own (minified)"],
    [false, true, true, true],
    rows.map((r) => [`\`${r.specifier}\``, kb(r.minified), kb(r.gzip), kb(r.own)])
  )
  const installed = JSON.parse(readFileSync(installPath, "utf8"))
  const installTable = padded(
    ["adapters installed", "for URLs", "packages", "files", "on disk"],
    [false, false, true, true, true],
    installed.rows.map((r) => [
      r.installed
        .filter((name) => name !== "@slowcall/core" && name !== "@slowcall/promise")
        .map((name) => `\`${name}\``)
        .join(", "),
      r.urls,
      String(r.packages),
      mib(r.bytes),
      mib(r.disk)
    ])
  )
  return [
    "# Package size",
    "",
    "## Installed size of the Promise API",
    "",
    "What `npm install` puts in `node_modules` for `@slowcall/promise` (and `@slowcall/core`) with the adapters its",
    "URLs need: the production dependency tree, every package counted once. The adapters are optional peer",
    "dependencies, so an application installs only its own: PGlite and Postgres need `@slowcall/adapter-postgres`",
    "alone, without the Redis client or the AWS SDK. **Files** is the bytes of the files; **on disk** counts 4 KiB",
    "blocks as `du -sh node_modules` does on ext4. Most of it is `effect` (which an Effect application already has)",
    "and, for PGlite, its WebAssembly build of Postgres.",
    "",
    ...installTable,
    "",
    `Measured ${installed.date} with \`${installed.command}\` (Node ${installed.node}, npm ${installed.npm}): each set`,
    "installed from the packed tarballs into an empty project outside the repository.",
    "",
    "## Bundle size of @slowcall/core",
    "",
    "What each entry point of `@slowcall/core` adds to an application bundle: the entry bundled alone with esbuild",
    "(ESM for Node 20, minified, tree-shaken, its dependencies bundled too; Node built-ins stay imports), then",
    "gzipped. **Own** is the part of the minified output that comes from slowcall's sources; the rest is `effect`,",
    "which an Effect application already ships.",
    "",
    ...table,
    "",
    "Generated by `npm run size` (scripts/size.mjs); a test fails when this page is out of date.",
    ""
  ].join("\n")
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const page = await render()
  console.log(page)
  if (!process.argv.includes("--print")) {
    writeFileSync(pagePath, page)
    console.log(`wrote ${relative(root, pagePath)}`)
  }
}
