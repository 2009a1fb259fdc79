/**
 * The process logger (`internal/log.ts`) in one process: it is the only logger that writes once provided, whatever
 * was installed before it (Effect's pretty logger, which `runMain` adds, wrote every line a second time and
 * unredacted); an error is shown by its message, not as `{}`; levels below the minimum are dropped.
 */
import { describe, expect, it, vi } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as Log from "../src/internal/log.js"

const capture = (format: Log.LogFormat, level: Log.Level, program: Effect.Effect<void>) => {
  const lines: Array<string> = []
  const console = vi.spyOn(globalThis.console, "log").mockImplementation(() => {})
  const errors = vi.spyOn(globalThis.console, "error").mockImplementation(() => {})
  try {
    Effect.runSync(
      program.pipe(
        Effect.provide(Log.layer({ format, level }, (line) => lines.push(line))),
        // What `NodeRuntime.runMain` installs unless told not to: a second logger that writes to the console.
        Effect.provide(Logger.pretty)
      )
    )
    return { lines, console: console.mock.calls.length + errors.mock.calls.length }
  } finally {
    console.mockRestore()
    errors.mockRestore()
  }
}

describe("the process logger", () => {
  it("is the only logger that writes, over a pretty logger installed before it", () => {
    const { console, lines } = capture(
      "text",
      "info",
      Effect.logWarning("once", new Error("sk-ant-api03-abcdefghijkl"))
    )
    expect(console).toBe(0)
    expect(lines).toEqual([expect.stringMatching(/^\S+ WARN {2}once: sk-ant-\[redacted\]$/)])
  })

  it("shows a tagged error by its tag and message, a plain object as JSON, never {}", () => {
    class Refused extends Error {
      readonly _tag = "Refused"
    }
    const { lines } = capture(
      "json",
      "info",
      Effect.logError("failed", new Refused("the provider said no"), { status: 403 })
    )
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: "error",
      message: 'failed: Refused: the provider said no: {"status":403}'
    })
  })

  it("drops lines below the level", () => {
    const program = Effect.all([Effect.logDebug("d"), Effect.logInfo("i"), Effect.logWarning("w")], { discard: true })
    expect(capture("text", "warn", program).lines).toHaveLength(1)
    expect(capture("text", "debug", program).lines).toHaveLength(3)
  })
})
