/**
 * The help of every `slowcall` command, run in-process through the same command tree and runner as the executable:
 * written for this CLI (no generic line of `@effect/cli` on every option, no wizard), wrapped to 80 columns when the
 * output is not a terminal, every option and argument described with its default, and an option shown as required
 * only when the parser refuses a run without it.
 */
import { readFileSync } from "node:fs"
import { CliConfig, CommandDescriptor, HelpDoc } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { simulateCommand } from "@slowcall/simulator/Command"
import * as CommandLine from "@slowcall/simulator/CommandLine"
import { Cause, type Console, Effect, Exit, Option } from "effect"
import { adviseCommand } from "../src/Advise.js"
import * as Cli from "../src/Cli.js"

// The commands bin.ts runs.
const extra = [adviseCommand, simulateCommand] as const
const tree = CommandLine.describe(Cli.root(extra))
const cli = Cli.make(extra, { width: () => 80 })

/** Runs `slowcall ...args` in-process, capturing what it writes through Effect's Console. */
const slowcall = (...args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const out: Array<string> = []
    const base = yield* Effect.console
    const capture: Console.Console = {
      ...base,
      log: (...parts) => Effect.sync(() => void out.push(parts.map(String).join(" "))),
      error: () => Effect.void,
      unsafe: { ...base.unsafe, log: (...parts) => void out.push(parts.map(String).join(" ")) }
    }
    const exit = yield* cli(["node", "slowcall", ...args]).pipe(Effect.withConsole(capture), Effect.exit)
    return { exit, out: out.join("\n") }
  }).pipe(Effect.provide(NodeContext.layer))

// @effect/cli's own help of the root lists every command with its usage, flags included: none may be missing from
// the help of that command here.
const ownUsages = HelpDoc.toAnsiText(CommandDescriptor.getHelp(Cli.root(extra).descriptor, CliConfig.defaultConfig))
  .replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "")
  .split("\n")
  .map((line) => line.trim())
const flagsOfOwnHelp = (words: ReadonlyArray<string>): ReadonlyArray<string> => {
  const line = ownUsages.find((usage) => usage.startsWith(`- ${words.join(" ")} `))
  if (line === undefined) throw new Error(`no usage line for ${words.join(" ")} in @effect/cli's help`)
  return [...new Set(line.match(/--[a-z][-a-z0-9]*/g) ?? [])]
}

/** Every command of the tree with the words that name it (the root: none). */
const walk = (
  command: CommandLine.CommandHelp,
  words: ReadonlyArray<string>
): ReadonlyArray<readonly [ReadonlyArray<string>, CommandLine.CommandHelp]> => [
  [words, command],
  ...command.subcommands.flatMap((sub) => walk(sub, [...words, sub.name]))
]
const commands = walk(tree, [])

// What @effect/cli writes on its own: its generic descriptions, its wizard and its repetition notes.
const boilerplate = [
  "A user-defined piece of text",
  "This setting is optional",
  "A true or false value",
  "An integer.",
  "One of the following",
  "This option may be repeated",
  "must be repeated at least",
  "can be set from environment variables",
  "--wizard",
  "wizard mode"
]

/** The rows of the help's `Options:` section, by the option's first name, each on one line. */
const optionRows = (help: string): Map<string, string> => {
  const section = help.split("\nOptions:\n")[1]!.split("\n\n")[0]!
  const rows = new Map<string, string>()
  let name: string | undefined
  for (const line of section.split("\n")) {
    name = /^ {2}(-[-\w]+)/.exec(line)?.[1] ?? name
    if (name !== undefined) rows.set(name, `${rows.get(name) ?? ""} ${line}`.replace(/\s+/g, " ").trim())
  }
  return rows
}

describe("slowcall --help, for every command", () => {
  it("walks a tree of every command the executable runs", () => {
    const names = commands.map(([words]) => words.join(" "))
    expect(names).toEqual(
      expect.arrayContaining([
        "",
        "serve",
        "token",
        "migrate",
        "jobs",
        "jobs get",
        "jobs list",
        "jobs cancel",
        "dlq",
        "dlq list",
        "dlq replay",
        "advise",
        "simulate"
      ])
    )
  })

  for (const [words, command] of commands) {
    const name = ["slowcall", ...words].join(" ")

    it.effect(`${name}: written for this CLI, 80 columns, every option described, optional ones optional`, () =>
      Effect.gen(function* () {
        // Act
        const { exit, out } = yield* slowcall(...words, "--help")
        const short = yield* slowcall(...words, "-h")
        // Assert
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(short.out).toBe(out)
        expect(
          out.startsWith(`${words.length === 0 ? "slowcall 0.1.0" : name}: ${command.description.slice(0, 20)}`)
        ).toBe(true)
        for (const text of boilerplate) expect(out, `${name} --help says ${JSON.stringify(text)}`).not.toContain(text)
        for (const line of out.split("\n")) expect(line.length, `${name}: ${line}`).toBeLessThanOrEqual(80)
        expect(out).not.toMatch(/ {10,}$/m)

        const usage = out.split("\n\n")[1]!.replace(/\n {4}/g, " ")
        expect(usage).toMatch(new RegExp(`^Usage: ${name} `))
        const rows = optionRows(out)
        for (const option of command.options) {
          const first = option.names[0]!
          expect(option.description, `${name} ${first} has a description`).not.toBe("")
          const row = rows.get(first) ?? rows.get(option.names.find((n) => !n.startsWith("--")) ?? first)
          expect(row, `${name} lists ${first}`).toBeDefined()
          expect(row).toContain(option.description.split(" ").slice(0, 3).join(" "))
          if (option.defaultValue !== undefined) expect(row).toContain(`default ${option.defaultValue}`)
          if (option.env !== undefined) expect(row).toContain(`env ${option.env}`)
          // Required only when the parser requires it: in the usage line and in the option's row alike.
          if (option.required) {
            expect(usage, `${name}: ${first} is required`).toContain(first)
            expect(row).toMatch(/\(required/)
          } else {
            expect(usage.split(" "), `${name}: ${first} is optional`).not.toContain(first)
            expect(row).not.toMatch(/\(required/)
          }
        }
        for (const arg of command.args) {
          expect(arg.description, `${name} ${arg.name} has a description`).not.toBe("")
          expect(out).toContain(`  ${arg.name}  `)
        }
        for (const sub of command.subcommands) expect(out).toMatch(new RegExp(`^ {2}${sub.name} +\\S`, "m"))
        if (command.subcommands.length === 0) {
          for (const flag of flagsOfOwnHelp(words)) expect(out, `${name} --help names ${flag}`).toContain(flag)
        }
        expect(rows.has("-h")).toBe(true)
      })
    )
  }
})

describe("slowcall help, by example", () => {
  it.effect("jobs list --help, whole", () =>
    Effect.gen(function* () {
      const { out } = yield* slowcall("jobs", "list", "--help")
      expect(out).toBe(
        [
          "slowcall jobs list: list jobs, newest first; ATTEMPTS is this run's count",
          "against its cap, and the lifetime count after a replay",
          "",
          "Usage: slowcall jobs list [options]",
          "",
          "Options:",
          "  --state STATE          only jobs in this state; one of queued, running,",
          "                         succeeded, failed, abandoned",
          "  --type TYPE            only jobs of this type",
          "  --idempotency-key KEY  only the job submitted with this idempotency key",
          "  --after JOB-ID         start after this job: the `next` cursor the previous",
          "                         page printed",
          "  --limit N              most jobs on the page, 1 to 1000 (default 20)",
          "  --url URL              base URL of a running slowcall server (default",
          "                         http://127.0.0.1:8787; env SLOWCALL_URL)",
          "  --json                 print the API's JSON response body unchanged instead of",
          "                         text",
          "  -h, --help             show this help and exit"
        ].join("\n")
      )
    })
  )

  it.effect("the CLI guide shows jobs get --help as it prints", () =>
    Effect.gen(function* () {
      const { out } = yield* slowcall("jobs", "get", "--help")
      const guide = readFileSync(new URL("../../../docs/guide/cli.md", import.meta.url), "utf8")
      expect(guide).toContain(`$ slowcall jobs get --help\n${out}\n\`\`\``)
    })
  )

  it.effect("dlq replay --help: --id is optional and described, --all and --dry-run are offered", () =>
    Effect.gen(function* () {
      const { out } = yield* slowcall("dlq", "replay", "--help")
      expect(out).toContain("Usage: slowcall dlq replay [options]\n")
      expect(out).toMatch(/^ {2}--id JOB-ID +replay this job \(repeat for several\)/m)
      expect(out).toMatch(/^ {2}--all +replay every dead letter/m)
      expect(out).toMatch(/^ {2}--dry-run +change nothing/m)
    })
  )

  it.effect("advise --help: --hop is the one required option, in the usage line and in its row", () =>
    Effect.gen(function* () {
      const { out } = yield* slowcall("advise", "--help")
      expect(out).toContain("Usage: slowcall advise --hop NAME=DURATION... [options]\n")
      expect(out).toMatch(/--hop NAME=DURATION +a hop on the request path[\s\S]*?decides \(required;\s+repeatable\)/)
      expect(out).toMatch(/--p99 DURATION +the p99 of the whole operation/)
    })
  )

  it.effect("the root lists the commands and the options that only the root has", () =>
    Effect.gen(function* () {
      const { out } = yield* slowcall("--help")
      expect(out).toMatch(/^slowcall 0\.1\.0: durable background jobs/)
      expect(out).toContain("Usage: slowcall <command> [options]")
      for (const name of ["serve", "token", "migrate", "jobs", "dlq", "advise", "simulate"]) {
        expect(out).toMatch(new RegExp(`^ {2}${name} +\\S`, "m"))
      }
      for (const flag of ["--version", "--completions SHELL", "--log-level LEVEL", "-h, --help"]) {
        expect(out).toContain(`  ${flag}`)
      }
    })
  )

  it.effect("a command that groups others prints its help when none is named", () =>
    Effect.gen(function* () {
      const alone = yield* slowcall("jobs")
      const asked = yield* slowcall("jobs", "--help")
      const root = yield* slowcall()
      expect(Exit.isSuccess(alone.exit)).toBe(true)
      expect(alone.out).toBe(asked.out)
      expect(alone.out).toContain("Usage: slowcall jobs <command> [options]")
      expect(root.out).toBe((yield* slowcall("--help")).out)
    })
  )

  it.effect("--wizard is refused as an unknown option and starts nothing", () =>
    Effect.gen(function* () {
      const { exit, out } = yield* slowcall("token", "--wizard")
      expect(out).toBe("")
      const failure = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(failure).toMatchObject({ _tag: "InvalidArgument" })
    })
  )

  it("wraps to the terminal's width on a terminal (at most 100 columns), to 80 otherwise", () => {
    expect(CommandLine.terminalWidth({ isTTY: false, columns: 200 })).toBe(80)
    expect(CommandLine.terminalWidth({})).toBe(80)
    expect(CommandLine.terminalWidth({ isTTY: true, columns: 60 })).toBe(60)
    expect(CommandLine.terminalWidth({ isTTY: true, columns: 572 })).toBe(100)
    const narrow = CommandLine.render(CommandLine.pathOf(tree, ["serve"]), {
      name: "slowcall",
      version: "0.1.0",
      width: 60
    })
    for (const line of narrow.split("\n")) expect(line.length, line).toBeLessThanOrEqual(60)
  })
})
