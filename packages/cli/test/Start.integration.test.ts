/**
 * `npm start` (scripts/start.mjs) stopped by a signal to its own pid, as a process manager or a closed terminal stops
 * it: the server stops gracefully with it, the port is free afterwards, and no process it started is left behind
 * (before, the server ran as a child that outlived a killed parent and kept the port).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createConnection } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { repoRoot, start, stopAll, waitFor } from "./processes.js"

const dir = mkdtempSync(join(tmpdir(), "slowcall-start-"))
afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
})

/** Every live descendant of `pid`, from the parent pids in /proc (Linux). */
const descendants = (pid: number): ReadonlyArray<number> => {
  const parents = new Map<number, number>()
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<number> = []
  const visit = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid === parent) {
        out.push(child)
        visit(child)
      }
    }
  }
  visit(pid)
  return out
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

describe("npm start", () => {
  for (const signal of ["SIGTERM", "SIGHUP"] as const) {
    it(`${signal} to its pid stops the server: the port is free, no child is left, the status is the server's`, async () => {
      const npmStart = start([join(repoRoot, "scripts/start.mjs"), "--port", "0", "--data-dir", join(dir, signal)])
      let port = 0
      await waitFor(
        npmStart,
        ({ stdout }) => {
          const match = /slowcall is serving http:\/\/127\.0\.0\.1:(\d+)\//.exec(stdout)
          if (match) port = Number(match[1])
          return match !== null
        },
        "the server to start"
      )
      expect(await accepts(port)).toBe(true)
      const children = descendants(npmStart.child.pid!)

      npmStart.child.kill(signal)
      expect(await npmStart.exited).toBe(0)

      expect(await accepts(port)).toBe(false)
      expect(children.filter(alive)).toEqual([])
    })
  }
})
