/**
 * The PGlite data directory lock (`PgDriver.lockDataDir`, taken by `acquirePglite`): one holder at a time, a live
 * holder named by its pid, a stale lock (its process gone, or its pid reused by a process that started later) taken
 * over, the lock released with the scope and only by its owner. The two-process case (two `slowcall serve` on one
 * directory) is packages/cli/test/ServeLock.integration.test.ts.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as DataDirLock from "../src/internal/dataDirLock.js"
import * as PgDriver from "../src/PgDriver.js"

const made: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-lock-"))
  made.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** The pid of a process that has ended (it ran and exited before this returns). */
const deadPid = (): number => {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" })
  return Number(child.stdout)
}

const lockFile = (dir: string) => join(dir, DataDirLock.lockFileName)
const writeLock = (dir: string, holder: Partial<DataDirLock.Holder>) =>
  writeFileSync(
    lockFile(dir),
    JSON.stringify({ host: hostname(), startTime: null, nonce: "n", since: "2026-01-01T00:00:00.000Z", ...holder })
  )

describe("data directory lock", () => {
  it("the first taker holds it; a second is told the holder's pid; release hands it on", () => {
    const dir = tempDir()
    const first = DataDirLock.acquire(dir)
    expect(first._tag).toBe("Acquired")
    const holder = JSON.parse(readFileSync(lockFile(dir), "utf8"))
    expect(holder).toMatchObject({ pid: process.pid, host: hostname() })
    expect(holder.startTime).toBe(DataDirLock.processStartTime(process.pid))
    const second = DataDirLock.acquire(dir)
    expect(second).toMatchObject({ _tag: "Locked", holder: { pid: process.pid } })
    if (first._tag === "Acquired") first.release()
    expect(existsSync(lockFile(dir))).toBe(false)
    const third = DataDirLock.acquire(dir)
    expect(third._tag).toBe("Acquired")
    if (third._tag === "Acquired") third.release()
  })

  it("a lock whose process has ended is stale: taken over", () => {
    const dir = tempDir()
    const pid = deadPid()
    writeLock(dir, { pid })
    const taken = DataDirLock.acquire(dir)
    expect(taken._tag).toBe("Acquired")
    expect(JSON.parse(readFileSync(lockFile(dir), "utf8")).pid).toBe(process.pid)
    if (taken._tag === "Acquired") taken.release()
  })

  it("a lock naming a live pid that started at another time (a reused pid) is stale; the same start time holds", () => {
    const dir = tempDir()
    const started = DataDirLock.processStartTime(process.pid)
    expect(started).not.toBeNull()
    writeLock(dir, { pid: process.pid, startTime: `${Number(started) + 1}` })
    const taken = DataDirLock.acquire(dir)
    expect(taken._tag).toBe("Acquired")
    if (taken._tag === "Acquired") taken.release()
    writeLock(dir, { pid: process.pid, startTime: started })
    expect(DataDirLock.acquire(dir)).toMatchObject({ _tag: "Locked", holder: { pid: process.pid } })
  })

  it("a lock of another host is never taken over, and an old unreadable one is", () => {
    const dir = tempDir()
    writeLock(dir, { pid: deadPid(), host: "some-other-host" })
    expect(DataDirLock.acquire(dir)).toMatchObject({ _tag: "Locked", holder: { host: "some-other-host" } })
    writeFileSync(lockFile(dir), "not json")
    const old = new Date(Date.now() - 60_000)
    utimesSync(lockFile(dir), old, old)
    const taken = DataDirLock.acquire(dir)
    expect(taken._tag).toBe("Acquired")
    if (taken._tag === "Acquired") taken.release()
  })

  it("release removes only its own lock", () => {
    const dir = tempDir()
    const taken = DataDirLock.acquire(dir)
    expect(taken._tag).toBe("Acquired")
    writeLock(dir, { pid: process.pid, nonce: "someone-else" })
    if (taken._tag === "Acquired") taken.release()
    expect(JSON.parse(readFileSync(lockFile(dir), "utf8")).nonce).toBe("someone-else")
  })

  it.effect("lockDataDir is held for the scope and fails with DataDirLocked naming the directory and pid", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const scope = yield* Scope.make()
      yield* Scope.extend(PgDriver.lockDataDir(dir), scope)
      const error = yield* Effect.flip(Effect.scoped(PgDriver.lockDataDir(dir)))
      expect(error._tag).toBe("DataDirLocked")
      expect(error).toMatchObject({ dataDir: dir, pid: process.pid, lockFile: lockFile(dir) })
      expect(error.message).toBe(`data directory ${dir} is in use by process ${process.pid} (see ${lockFile(dir)})`)
      yield* Scope.close(scope, Exit.void)
      expect(existsSync(lockFile(dir))).toBe(false)
    })
  )

  it.effect("acquirePglite refuses a locked directory before opening it", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const held = DataDirLock.acquire(dir)
      const error = yield* Effect.flip(Effect.scoped(PgDriver.acquirePglite({ dataDir: dir })))
      expect(error).toMatchObject({ _tag: "DataDirLocked", pid: process.pid })
      // Nothing was created: PGlite never opened the directory.
      expect(existsSync(join(dir, "PG_VERSION"))).toBe(false)
      if (held._tag === "Acquired") held.release()
    })
  )
})
