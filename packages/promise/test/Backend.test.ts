import { describe, expect, it } from "vitest"
import { Backend, ConfigError } from "../src/index.js"

describe("Backend.parse", () => {
  it("names the store each URL scheme stands for", () => {
    expect(Backend.parse("postgres://u@h:5432/db")).toEqual({ _tag: "Postgres", url: "postgres://u@h:5432/db" })
    expect(Backend.parse("postgresql://h/db")._tag).toBe("Postgres")
    expect(Backend.parse("pglite:memory")).toEqual({ _tag: "Pglite", dataDir: undefined })
    expect(Backend.parse("pglite:")).toEqual({ _tag: "Pglite", dataDir: undefined })
    expect(Backend.parse("pglite:/var/lib/jobs")).toEqual({ _tag: "Pglite", dataDir: "/var/lib/jobs" })
    expect(Backend.parse("pglite:///var/lib/jobs")).toEqual({ _tag: "Pglite", dataDir: "/var/lib/jobs" })
    expect(Backend.parse("pglite:./data")).toEqual({ _tag: "Pglite", dataDir: "./data" })
    expect(Backend.parse("redis://127.0.0.1:6379")).toEqual({ _tag: "Redis", url: "redis://127.0.0.1:6379" })
    expect(Backend.parse("rediss://h:6380")._tag).toBe("Redis")
    expect(Backend.parse("memory:")).toEqual({ _tag: "Memory" })
  })

  it("refuses any other scheme with ConfigError, without echoing credentials", () => {
    let error: unknown
    try {
      Backend.parse("mysql://root:hunter2@db/x")
    } catch (caught) {
      error = caught
    }

    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).not.toContain("hunter2")
    expect((error as ConfigError).message).toContain("postgres://")
  })
})
