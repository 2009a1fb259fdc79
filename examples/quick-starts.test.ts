/**
 * The quick starts run as a reader pastes them. One fresh folder under the OS temp dir (outside the monorepo, so
 * nothing resolves to the workspace's sources) goes through docs/guide/getting-started.md's Install section: the
 * clone's `npm run pack` (into the temp folder), then the project's install lines exactly as the page writes them,
 * `/path/to/slowcall` standing for the packed clone. Every example of the README and of the getting-started page (and
 * the Promise guide's quick start) is then saved as `quick-start.ts` and run with the page's run command; the quick
 * start also as plain JavaScript with `node`. The same install shows that `@slowcall/promise` loads only the adapter a
 * URL names and says which package to install for another, and how much it put on disk.
 *
 * Third-party dependencies come from the registry (or npm's own cache); one install per run, nothing kept.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { transform } from "esbuild"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
const read = (file: string) => readFileSync(join(root, file), "utf8")
const { measure } = (await import(new URL("../scripts/install-size.mjs", import.meta.url).href)) as {
  readonly measure: (project: string) => { readonly packages: number; readonly bytes: number; readonly disk: number }
}

/** The text of a Markdown section: from its `## ` heading to the next one. */
const section = (markdown: string, heading: string): string => {
  const start = markdown.indexOf(`\n## ${heading}\n`)
  if (start < 0) throw new Error(`no "## ${heading}" section`)
  const end = markdown.indexOf("\n## ", start + 1)
  return markdown.slice(start, end < 0 ? undefined : end)
}

const fenced = (markdown: string, lang: string): Array<string> =>
  [...markdown.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\``, "g"))].map((m) => m[1]!)

/** The files a page includes with VitePress's `<<< @/snippets/x.ts`, as the reader sees them. */
const included = (markdown: string): Array<{ name: string; code: string }> =>
  [...markdown.matchAll(/^<<< @\/(\S+)$/gm)].map((m) => ({ name: m[1]!, code: read(join("docs", m[1]!)) }))

const readme = read("README.md")
const gettingStarted = read("docs/guide/getting-started.md")
const install = fenced(section(gettingStarted, "Install"), "sh")
const quickStart = "snippets/promise-quick-start.ts"
/** Every example of the pages, each distinct text once (the quick start is on two pages), named by where it is. */
const snippets = [
  ...fenced(readme, "ts").map((code, i) => ({ name: `README.md ts block ${i + 1}`, code })),
  ...fenced(gettingStarted, "ts").map((code, i) => ({ name: `getting-started.md ts block ${i + 1}`, code })),
  ...included(gettingStarted).map((s) => ({ name: `getting-started.md ${s.name}`, code: s.code })),
  ...included(section(read("docs/guide/promise.md"), "Quick start")).map((s) => ({
    name: `promise.md ${s.name}`,
    code: s.code
  }))
].reduce<Array<{ name: string; code: string }>>((distinct, s) => {
  const same = distinct.find((d) => d.code === s.code)
  if (same === undefined) distinct.push({ ...s })
  else same.name = `${same.name} and ${s.name}`
  return distinct
}, [])

/** The environment of a reader's shell: none of the npm settings of the `npm test` that runs this file. */
const readerEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== "INIT_CWD" && key !== "NODE_OPTIONS") env[key] = value
  }
  // Quieter and faster, without changing what is installed.
  return {
    ...env,
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
    npm_config_prefer_offline: "true"
  }
}

/** Runs a command to its end without blocking this worker; rejects with its output when it fails or overruns. */
const exec = (cmd: string, args: ReadonlyArray<string>, cwd: string, timeoutMs: number) =>
  new Promise<{ stdout: string; stderr: string }>((done, fail) => {
    const child = spawn(cmd, args, { cwd, env: readerEnv() })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c) => {
      stdout += c
    })
    child.stderr.on("data", (c) => {
      stderr += c
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("error", fail)
    child.on("close", (status, signal) => {
      clearTimeout(timer)
      if (status === 0) done({ stdout, stderr })
      else fail(new Error(`${cmd} ${args.join(" ")} exited ${status ?? signal}:\n${stdout}\n${stderr}`))
    })
  })

/** A page's shell lines, run by bash as a reader's terminal would, stopping at the first that fails. */
const shell = (lines: string, cwd: string, timeoutMs: number) => exec("bash", ["-e", "-c", lines], cwd, timeoutMs)

let work = ""
let project = ""

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "slowcall-quick-starts-"))
  const clone = join(work, "slowcall")
  const [inClone, inProject] = install
  expect(inClone, "the first Install block is what runs in the clone").toBe("npm run pack")
  // The clone's `npm run pack`, written to the temp folder instead of the repository's .scratch/pack.
  await exec("npm", ["run", "--silent", "pack", "--", "--out", join(clone, ".scratch", "pack")], root, 420_000)
  const folder = /^mkdir (\S+) && cd \1$/m.exec(inProject ?? "")?.[1]
  expect(folder, "the project block starts with `mkdir <folder> && cd <folder>`").toBeDefined()
  project = join(work, folder!)
  await shell(inProject!.replaceAll("/path/to/slowcall", clone), work, 300_000)
}, 780_000)

afterAll(() => {
  if (work !== "") rmSync(work, { recursive: true, force: true })
})

describe("the getting-started install, in a fresh folder outside the repository", () => {
  it("finds the page's install and run blocks and every example", () => {
    expect(install).toHaveLength(3)
    expect(install[2]).toBe("npx tsx quick-start.ts")
    expect(snippets.map((s) => s.name)).toEqual([
      "README.md ts block 1",
      "README.md ts block 2",
      `getting-started.md ${quickStart} and promise.md ${quickStart}`,
      "getting-started.md snippets/getting-started.ts"
    ])
  })

  it("installs the packages the page names and no adapter it does not (no Redis client, no AWS SDK)", () => {
    expect(JSON.parse(readFileSync(join(project, "package.json"), "utf8")).type).toBe("module")
    expect(readdirSync(join(project, "node_modules", "@slowcall")).sort()).toEqual([
      "adapter-postgres",
      "core",
      "promise"
    ])
    expect(existsSync(join(project, "node_modules", "ioredis"))).toBe(false)
    expect(existsSync(join(project, "node_modules", "@aws-sdk"))).toBe(false)
  })

  for (const snippet of snippets) {
    it(`runs ${snippet.name} with the page's command, to a finished job`, async () => {
      writeFileSync(join(project, "quick-start.ts"), snippet.code)

      const { stdout } = await shell(install[2]!, project, 120_000)

      expect(stdout).toMatch(/^succeeded .* cents$/m)
      if (snippet.code === read(join("docs", quickStart))) {
        // The quick start prints what the getting-started page says it prints.
        const promised = /It\s+prints\s+`([^`]+)`/.exec(section(gettingStarted, "Quick start: a job as a promise"))
        expect(stdout.trim()).toBe(promised?.[1])
      }
    }, 150_000)
  }

  it("runs the quick start as plain JavaScript with node, its type annotations dropped", async () => {
    const { code } = await transform(read(join("docs", quickStart)), { loader: "ts", format: "esm", target: "node20" })
    writeFileSync(join(project, "quick-start.mjs"), code)

    const { stdout } = await exec(process.execPath, ["quick-start.mjs"], project, 120_000)

    expect(stdout).toMatch(/^succeeded .* 2 cents$/m)
  }, 150_000)

  it("opens pglite:memory with the Postgres adapter alone and names the package a redis:// URL or sqs needs", async () => {
    writeFileSync(
      join(project, "adapters.mjs"),
      `import { AdapterNotInstalled, open } from "@slowcall/promise"
const queue = await open({ url: "pglite:memory" })
const { id } = await queue.submit("noop", {})
const pglite = (await queue.get(id)).state
await queue.close()
const refusal = (options) =>
  open(options).then(
    (opened) => opened.close().then(() => "opened"),
    (e) => ({ adapterNotInstalled: e instanceof AdapterNotInstalled, code: e.code, packageName: e.packageName, message: e.message })
  )
const redis = await refusal({ url: "redis://127.0.0.1:6379" })
const sqs = await refusal({ url: "pglite:memory", sqs: { queueUrl: "http://127.0.0.1:9/000000000000/jobs" } })
console.log(JSON.stringify({ pglite, redis, sqs }))
`
    )

    const { stdout } = await exec(process.execPath, ["adapters.mjs"], project, 120_000)

    expect(JSON.parse(stdout)).toEqual({
      pglite: "queued",
      redis: {
        adapterNotInstalled: true,
        code: "adapter_not_installed",
        packageName: "@slowcall/adapter-redis",
        message: "install @slowcall/adapter-redis to use redis:// URLs (npm install @slowcall/adapter-redis)"
      },
      sqs: {
        adapterNotInstalled: true,
        code: "adapter_not_installed",
        packageName: "@slowcall/adapter-sqs",
        message: "install @slowcall/adapter-sqs to use the sqs option (npm install @slowcall/adapter-sqs)"
      }
    })
  }, 150_000)

  it("puts on disk about what the Package size page says for the Postgres adapter alone", () => {
    const documented = JSON.parse(read("docs/guide/install-size.json")).rows[0] as {
      readonly installed: ReadonlyArray<string>
      readonly bytes: number
    }
    expect(documented.installed).toEqual(["@slowcall/core", "@slowcall/promise", "@slowcall/adapter-postgres"])

    const measured = measure(project)

    // Registry releases of third-party dependencies move the figure a little; a fifth off means the page is stale
    // (`npm run size:install` measures it again).
    expect(Math.abs(measured.bytes - documented.bytes) / documented.bytes).toBeLessThan(0.2)
  })
})
