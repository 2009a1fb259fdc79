/**
 * The servers a chaos run owns and breaks: a Postgres cluster made for the run (initdb into a temporary directory),
 * a Redis with an append-only file in a temporary directory, the SQS emulator. Each can be stopped hard and started
 * again on the same port with the data it kept; `destroy` stops it and removes its files.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createConnection } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type FauxqsServer, startFauxqs } from "fauxqs"

/** A server the harness can take down and bring back. */
export interface Breakable {
  readonly url: string
  /** Down the hard way: the process is killed (Postgres: `immediate` shutdown, no checkpoint). */
  readonly crash: () => Promise<void>
  readonly start: () => Promise<void>
  readonly destroy: () => Promise<void>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resolves once something accepts TCP connections on the port (at most `timeoutMs`). */
export const waitForPort = async (port: number, timeoutMs = 30_000): Promise<void> => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: "127.0.0.1", port })
      socket.once("connect", () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })
    if (open) return
    await sleep(100)
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`)
}

const postgresBin = (): string => {
  const versions = readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a))
  for (const version of versions) {
    const bin = `/usr/lib/postgresql/${version}/bin`
    if (existsSync(join(bin, "pg_ctl"))) return bin
  }
  throw new Error("no Postgres server binaries under /usr/lib/postgresql")
}

/** Runs a Postgres tool of `bin`, as the `postgres` user when this process is root (initdb refuses root). */
const pgTool = (bin: string, tool: string, args: ReadonlyArray<string>) => {
  const path = join(bin, tool)
  if (process.getuid?.() === 0) {
    execFileSync("runuser", ["-u", "postgres", "--", path, ...args], { stdio: ["ignore", "ignore", "pipe"] })
  } else {
    execFileSync(path, args, { stdio: ["ignore", "ignore", "pipe"] })
  }
}

/** A Postgres cluster of its own on `port` (trust auth, user postgres, fsync on). */
export const postgres = async (port: number): Promise<Breakable> => {
  const bin = postgresBin()
  const dir = mkdtempSync(join(tmpdir(), "slowcall-chaos-pg-"))
  if (process.getuid?.() === 0) execFileSync("chown", ["postgres", dir])
  const data = join(dir, "data")
  pgTool(bin, "initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"])
  const start = async () => {
    pgTool(bin, "pg_ctl", [
      "-D",
      data,
      "-l",
      join(dir, "log"),
      "-o",
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`,
      "-w",
      "start"
    ])
    await waitForPort(port)
  }
  const stop = () => pgTool(bin, "pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
  await start()
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    crash: async () => stop(),
    start,
    destroy: async () => {
      try {
        stop()
      } catch {
        // already down
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A Redis of its own on `port`, with an append-only file fsynced as `appendfsync` says, and no eviction. */
export const redis = async (port: number, appendfsync: "always" | "everysec"): Promise<Breakable> => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-chaos-redis-"))
  let child: ChildProcess | undefined
  const start = async () => {
    child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        appendfsync,
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction"
      ],
      { stdio: "ignore" }
    )
    await waitForPort(port)
  }
  const crash = async () => {
    const running = child
    if (running === undefined || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once("exit", resolve))
    running.kill("SIGKILL")
    await exited
  }
  await start()
  return {
    url: `redis://127.0.0.1:${port}/0`,
    crash,
    start,
    destroy: async () => {
      await crash()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A message the emulator deleted (a consumer's ack): its body, and when (epoch ms). */
export interface Deleted {
  readonly body: string
  readonly at: number
}

/**
 * The SQS emulator on `port` with one queue, `name`; a restart loses every message, as fauxqs keeps none. `deleted`
 * lists every message a consumer deleted (acked), across restarts.
 */
export const sqs = async (
  port: number,
  name: string
): Promise<Breakable & { readonly queueUrl: string; readonly deleted: () => ReadonlyArray<Deleted> }> => {
  let server: FauxqsServer | undefined
  let queueUrl = ""
  const kept: Array<Deleted> = []
  const deletedBy = (running: FauxqsServer): Array<Deleted> =>
    running.spy
      .getAllMessages()
      .flatMap((message) =>
        message.service === "sqs" && message.status === "consumed"
          ? [{ body: message.body, at: message.timestamp }]
          : []
      )
  const start = async () => {
    server = await startFauxqs({ port, logger: false, host: "127.0.0.1", messageSpies: { bufferSize: 10_000_000 } })
    queueUrl = server.createQueue(name).queueUrl
  }
  const crash = async () => {
    if (server !== undefined) kept.push(...deletedBy(server))
    await server?.stop()
    server = undefined
  }
  await start()
  return {
    url: `http://127.0.0.1:${port}`,
    get queueUrl() {
      return queueUrl
    },
    crash,
    start,
    destroy: crash,
    deleted: () => [...kept, ...(server === undefined ? [] : deletedBy(server))]
  }
}
