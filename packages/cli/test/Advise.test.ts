import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, type Console, Effect, Exit, Option } from "effect"
import { adviseCommand } from "../src/Advise.js"

const cli = Command.run(adviseCommand, { name: "slowcall", version: "0.1.0" })

/** Runs `advise` with argv, capturing what it writes through Effect's Console. */
const advise = (...args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const out: Array<string> = []
    const err: Array<string> = []
    const base = yield* Effect.console
    const push =
      (into: Array<string>) =>
      (...parts: ReadonlyArray<unknown>) =>
        Effect.sync(() => {
          into.push(parts.map(String).join(" "))
        })
    const capture: Console.Console = {
      ...base,
      log: push(out),
      info: push(out),
      error: push(err),
      warn: push(err),
      unsafe: {
        ...base.unsafe,
        log: (...parts) => void out.push(parts.map(String).join(" ")),
        error: (...parts) => void err.push(parts.map(String).join(" "))
      }
    }
    const exit = yield* cli(["node", "slowcall", ...args]).pipe(Effect.withConsole(capture), Effect.exit)
    return { exit, out: out.join("\n"), err: err.join("\n"), errLines: err }
  }).pipe(Effect.provide(NodeContext.layer))

/** The typed failure of a run, or undefined when it succeeded or died. */
const failureOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const json = (out: string) => JSON.parse(out) as Record<string, unknown>

const dir = mkdtempSync(join(tmpdir(), "slowcall-advise-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const samplesFile = (name: string, text: string) => {
  const p = join(dir, name)
  writeFileSync(p, text)
  return p
}

describe("slowcall advise", () => {
  it.effect("45 s against a 60 s hop: async, rule within-2x, exact JSON shape", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "45s", "--hop", "lb=60s", "--json")
      expect(Exit.isSuccess(r.exit)).toBe(true)
      const j = json(r.out)
      expect(Object.keys(j)).toEqual(["mode", "rule", "p99Ms", "shortestHop", "ratio", "reasons"])
      expect(j).toMatchObject({
        mode: "async",
        rule: "within-2x",
        p99Ms: 45_000,
        shortestHop: { name: "lb", timeoutMs: 60_000 },
        ratio: 0.75
      })
      expect((j.reasons as Array<string>).length).toBeGreaterThan(1)
    })
  )

  it.effect("boundary: p99 exactly half the shortest hop is async", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "30s", "--hop", "lb=60s", "--hop", "cdn=100s", "--json")
      expect(json(r.out)).toMatchObject({ mode: "async", rule: "within-2x", ratio: 0.5 })
    })
  )

  it.effect("boundary: 1 ms under half the shortest hop with a user waiting is sync-stream", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "29999ms", "--hop", "lb=1m", "--user-waiting", "--json")
      expect(json(r.out)).toMatchObject({ mode: "sync-stream", rule: "well-under", p99Ms: 29_999 })
    })
  )

  it.effect("5 s against a 60 s hop, user waiting by default: sync with streaming, one sentence", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "5s", "--hop", "lb=60s")
      expect(Exit.isSuccess(r.exit)).toBe(true)
      expect(r.out.split("\n")).toHaveLength(1)
      expect(r.out).toMatch(/^The p99 of 5s is under half the shortest hop timeout, lb \(1m\), by 25s, .*stream/)
      expect(r.err).toBe("")
    })
  )

  it.effect("the shortest of several hops decides", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "16s", "--hop", "cdn=100s", "--hop", "gateway=29s", "--hop", "lb=60s", "--json")
      expect(json(r.out)).toMatchObject({
        mode: "async",
        rule: "within-2x",
        shortestHop: { name: "gateway", timeoutMs: 29_000 }
      })
    })
  )

  it.effect("--outlives-session: async however fast", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "200ms", "--hop", "lb=60s", "--outlives-session", "--json")
      expect(json(r.out)).toMatchObject({ mode: "async", rule: "outlives-session" })
    })
  )

  it.effect("--result-later: async", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "2s", "--hop", "lb=60s", "--result-later", "--json")
      expect(json(r.out)).toMatchObject({ mode: "async", rule: "result-later" })
    })
  )

  it.effect("--no-user-waiting with a fast call: async under result-later", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "2s", "--hop", "lb=60s", "--no-user-waiting")
      expect(r.out).toMatch(/^Nobody is waiting/)
    })
  )

  it.effect("human output names the rule's reason for async", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "40s", "--hop", "lb=60s")
      expect(r.out).toMatch(/within 2x of the shortest hop timeout.*run it as a job/)
      const past = yield* advise("--p99", "2m", "--hop", "lb=60s")
      expect(past.out).toMatch(/at or past the shortest hop timeout itself.*run it as a job/)
    })
  )

  it.effect("missing hops: the parser refuses the run, naming --hop, and nothing is decided", () =>
    Effect.gen(function* () {
      const r = yield* advise("--p99", "45s")
      expect(Exit.isFailure(r.exit)).toBe(true)
      expect(r.err).toMatch(/--hop/)
      expect(r.out).toBe("")
    })
  )

  it.effect.each([
    [["--p99", "45s", "--hop", "60s"], /expected <name>=<duration>/],
    [["--p99", "45s", "--hop", "lb=soon"], /^--hop lb: "soon" is not a duration \(45s, 1500ms, 2m, 1m30s\)$/],
    [["--p99", "45s", "--hop", "lb=0s"], /^--hop lb: the timeout must be more than 0, for example lb=60s$/],
    [["--p99", "fast", "--hop", "lb=60s"], /^--p99: "fast" is not a duration/],
    [["--hop", "lb=60s"], /needs --p99/]
  ] as const)("bad input %j fails with a one-line AdviseError and prints nothing itself", ([args, message]) =>
    Effect.gen(function* () {
      const r = yield* advise(...args)
      expect(Exit.isFailure(r.exit)).toBe(true)
      const failure = Exit.isFailure(r.exit) ? Cause.failureOption(r.exit.cause) : Option.none()
      expect(Option.getOrUndefined(failure)).toMatchObject({
        _tag: "AdviseError",
        message: expect.stringMatching(message)
      })
      expect(r.errLines).toEqual([])
      expect(r.out).toBe("")
    })
  )

  it.effect.each([
    [["--p99", "45", "--hop", "lb=60s"], "--p99: 45 what? (45s, 45000ms)"],
    [["--p99", "45s", "--hop", "lb=60"], "--hop lb: 60 what? (60s, 60000ms)"],
    [["--p99", "45s", "--hop", "cdn=100s", "--hop", "lb=60"], "--hop lb: 60 what? (60s, 60000ms)"],
    [["--samples", "SAMPLES", "--timeout", "20", "--hop", "lb=60s"], "--timeout: 20 what? (20s, 20000ms)"],
    [
      ["--samples", "SAMPLES", "--timeout", "20s", "--backoff", "1", "--hop", "lb=60s"],
      "--backoff: 1 what? (1s, 1000ms)"
    ],
    [
      ["--samples", "SAMPLES", "--timeout", "20s", "--fallback-p99", "2.5", "--hop", "lb=60s"],
      "--fallback-p99: 2.5 what? (2.5s, 2500ms)"
    ]
  ] as const)("a duration without a unit, %j, is refused with a question: nothing is decided", ([args, message]) =>
    Effect.gen(function* () {
      // Arrange: 45 read as milliseconds would advise the opposite of 45 seconds.
      const file = samplesFile("unitless.txt", "3000\n")
      // Act
      const r = yield* advise(...args.map((arg) => (arg === "SAMPLES" ? file : arg)))
      // Assert
      expect(failureOf(r.exit)).toMatchObject({ _tag: "AdviseError", message })
      expect(r.out).toBe("")
      expect(r.errLines).toEqual([])
    })
  )

  it.effect("--samples computes the effective p99 first and reports it", () =>
    Effect.gen(function* () {
      // 95% at 3 s, 5% over a 20 s timeout: the p99 is one timeout plus a success, 23 s, over half of 40 s
      const file = samplesFile("mixed.txt", `# latency ms\n${"3000\n".repeat(95)}${"45000\n".repeat(5)}\n`)
      const r = yield* advise("--samples", file, "--timeout", "20s", "--retries", "2", "--hop", "lb=40s", "--json")
      expect(Exit.isSuccess(r.exit)).toBe(true)
      const j = json(r.out)
      expect(j.p99Ms).toBe(23_000)
      expect(j).toMatchObject({ mode: "async", rule: "within-2x" })
      expect((j.reasons as Array<string>).at(-1)).toMatch(/effective p99 23s .* from 100 samples/)
    })
  )

  it.effect("--samples with no timeouts stays sync for a waiting user, and the seed makes it repeatable", () =>
    Effect.gen(function* () {
      const file = samplesFile("fast.txt", Array.from({ length: 200 }, (_, i) => `${1000 + i * 10}`).join("\n"))
      const args = [
        "--samples",
        file,
        "--timeout",
        "10s",
        "--retries",
        "1",
        "--backoff",
        "500ms",
        "--hop",
        "lb=60s",
        "--json"
      ]
      const a = yield* advise(...args)
      const b = yield* advise(...args)
      expect(json(a.out)).toMatchObject({ mode: "sync-stream", rule: "well-under" })
      expect(a.out).toBe(b.out)
      expect(json(a.out).p99Ms).toBeGreaterThanOrEqual(2_900)
      expect(json(a.out).p99Ms).toBeLessThanOrEqual(2_990)
    })
  )

  it.effect("--samples with a fallback adds its latency when every attempt times out", () =>
    Effect.gen(function* () {
      const file = samplesFile("slow.txt", "90000\n")
      const r = yield* advise(
        "--samples",
        file,
        "--timeout",
        "10s",
        "--fallback-p99",
        "4s",
        "--hop",
        "lb=60s",
        "--json"
      )
      expect(json(r.out).p99Ms).toBe(14_000)
    })
  )

  it.effect.each([
    [["--timeout", "10s"], "nope.txt", "", /cannot read the file/],
    [["--timeout", "10s"], "bad.txt", "100\nabc\n", /line 2 is not a latency/],
    [[], "ok.txt", "100\n", /needs --timeout/],
    [["--timeout", "10s", "--p99", "5s"], "ok2.txt", "100\n", /either --p99 or --samples/]
  ] as const)("--samples problems %j -> one line", ([extra, name, content, message]) =>
    Effect.gen(function* () {
      const file = name === "nope.txt" ? join(dir, name) : samplesFile(name, content)
      const r = yield* advise("--samples", file, ...extra, "--hop", "lb=60s")
      expect(failureOf(r.exit)).toMatchObject({ _tag: "AdviseError", message: expect.stringMatching(message) })
      expect(r.errLines).toEqual([])
    })
  )
})
