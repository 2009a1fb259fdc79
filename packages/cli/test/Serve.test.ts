import { describe, expect, it } from "@effect/vitest"
import * as Auth from "@slowcall/http/Auth"
import { Either, Option } from "effect"
import * as Retention from "../src/internal/retention.js"
import { loadTokens, type ServeOptions } from "../src/Serve.js"
import { allowedHostsFor, exposure, isLoopback } from "../src/Serving.js"

const base: ServeOptions = {
  demo: false,
  port: 0,
  host: "127.0.0.1",
  queue: "default",
  jobTypes: [],
  concurrency: 1,
  dataDir: "./.slowcall",
  memory: true
}

describe("serve's exposure rules", () => {
  it("an open API binds to loopback only, unless --allow-unauthenticated says otherwise", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "::1", "localhost"]) expect(isLoopback(host), host).toBe(true)
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "example.com"]) expect(isLoopback(host), host).toBe(false)
    expect(Either.isRight(exposure(base))).toBe(true)
    expect(Either.isLeft(exposure({ ...base, host: "0.0.0.0" }))).toBe(true)
    expect(Either.isRight(exposure({ ...base, host: "0.0.0.0", allowUnauthenticated: true }))).toBe(true)
    const tokens = Either.getOrThrow(Auth.parseTokens(`acme ${Auth.hashToken("t")}`))
    expect(Either.isRight(exposure({ ...base, host: "0.0.0.0", tokens }))).toBe(true)
  })

  it("answers the loopback names, the bound address and each --allowed-host", () => {
    expect(allowedHostsFor({ host: "127.0.0.1" })).toEqual(["localhost", "127.0.0.1", "[::1]"])
    expect(allowedHostsFor({ host: "10.0.0.5", allowedHosts: ["api.example.com"] })).toEqual([
      "localhost",
      "127.0.0.1",
      "[::1]",
      "10.0.0.5",
      "api.example.com"
    ])
    expect(allowedHostsFor({ host: "0.0.0.0" })).toEqual(["localhost", "127.0.0.1", "[::1]"])
    expect(allowedHostsFor({ host: "fd00::1" })).toContain("[fd00::1]")
    expect(allowedHostsFor({ host: "0.0.0.0", allowedHosts: ["*"] })).toBe("*")
  })

  it("tokens come from the file, else SLOWCALL_TOKENS, else none; a bad or empty list is an error", () => {
    expect(loadTokens(Option.none(), Option.none())).toEqual(Either.right(undefined))
    const table = loadTokens(Option.none(), Option.some(`a=${Auth.hashToken("x")},b=${Auth.hashToken("y")}`))
    expect(Either.getOrThrow(table)?.map((entry) => entry.tenant)).toEqual(["a", "b"])
    expect(loadTokens(Option.none(), Option.some("# nothing"))).toMatchObject({
      left: { message: "SLOWCALL_TOKENS: no tokens in it" }
    })
    expect(loadTokens(Option.some("/no/such/file"), Option.none())).toMatchObject({
      left: { message: expect.stringMatching(/^--tokens-file \/no\/such\/file: cannot read it/) }
    })
  })
})

describe("serve's --retention", () => {
  it("reads a positive duration with its unit, or off; anything else says what it takes", () => {
    expect(Retention.parse("7d")).toEqual({ ms: 7 * 86_400_000 })
    expect(Retention.parse("12h")).toEqual({ ms: 12 * 3_600_000 })
    expect(Retention.parse("2.5m")).toEqual({ ms: 150_000 })
    expect(Retention.parse("90s")).toEqual({ ms: 90_000 })
    expect(Retention.parse("1500ms")).toEqual({ ms: 1_500 })
    expect(Retention.parse("2w")).toEqual({ ms: 14 * 86_400_000 })
    expect(Retention.parse(" OFF ")).toEqual({ ms: undefined })
    for (const bad of ["7", "7 fortnights", "-1d", "0s", "999ms", "d", ""]) {
      expect(Retention.parse(bad), bad).toHaveProperty("problem")
    }
  })

  it("purges every tenth of the retention, at least each minute and at most each second", () => {
    expect(Retention.intervalFor(7 * 86_400_000)).toBe(60_000)
    expect(Retention.intervalFor(300_000)).toBe(30_000)
    expect(Retention.intervalFor(4_000)).toBe(1_000)
  })
})
