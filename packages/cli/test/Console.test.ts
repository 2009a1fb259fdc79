import { describe, expect, it } from "@effect/vitest"
import type { Console } from "effect"
import { colourFor, plainConsole, stripAnsi } from "../src/internal/console.js"

/** A base console that records what reaches it. */
const recording = () => {
  const seen: Array<[string, string]> = []
  const record =
    (stream: string) =>
    (...args: ReadonlyArray<unknown>) => {
      seen.push([stream, args.map(String).join(" ")])
    }
  const unsafe = { ...console, log: record("out"), error: record("err") } as unknown as globalThis.Console
  const base = {
    unsafe,
    log: (...args: ReadonlyArray<unknown>) => ({ pipe: () => undefined, args, stream: "out" }),
    error: (...args: ReadonlyArray<unknown>) => ({ args, stream: "err" })
  } as unknown as Console.Console
  return { base, seen }
}

describe("the executable's console", () => {
  const bold = "\u001b[0;1mUSAGE\u001b[0m"

  it("keeps colour only on a terminal, and never with NO_COLOR", () => {
    expect(colourFor({ isTTY: true }, {})).toBe(true)
    expect(colourFor({ isTTY: true }, { NO_COLOR: "" })).toBe(true)
    expect(colourFor({ isTTY: true }, { NO_COLOR: "1" })).toBe(false)
    expect(colourFor({ isTTY: false }, {})).toBe(false)
    expect(colourFor({}, {})).toBe(false)
    expect(stripAnsi(bold)).toBe("USAGE")
  })

  it("strips escapes per stream: stdout a pipe, stderr a terminal", () => {
    const { base, seen } = recording()
    const plain = plainConsole({ stdout: { isTTY: false }, stderr: { isTTY: true }, env: {} }, base)
    plain.unsafe.log(bold)
    plain.unsafe.error(bold)
    expect(seen).toEqual([
      ["out", "USAGE"],
      ["err", bold]
    ])
    expect((plain.log(bold) as unknown as { args: Array<string> }).args).toEqual(["USAGE"])
  })
})
