/**
 * Redis servers a test starts itself, each in a temporary folder of its own on free ports: a Cluster of three
 * masters, or one server (with the append-only file on, or with no persistence). Every server is stopped (`SHUTDOWN NOSAVE`, or SIGKILL for
 * a crash) and its folder removed by `stop`, which the tests call in `afterAll` even when they fail.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Whether a TCP port on 127.0.0.1 is free right now. */
const isFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * `count` free ports whose Cluster bus ports (port + 10000) are free too.
 */
export const freePorts = async (count: number): Promise<Array<number>> => {
  const ports: Array<number> = []
  for (let tries = 0; ports.length < count && tries < 500; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000)
    if (ports.includes(port)) continue
    if ((await isFree(port)) && (await isFree(port + 10_000))) ports.push(port)
  }
  if (ports.length < count) throw new Error("no free ports")
  return ports
}

const cli = (port: number, ...args: Array<string>): string =>
  execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], { encoding: "utf8", timeout: 10_000 })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitFor = async (what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    try {
      if (check()) return
    } catch {
      // not up yet
    }
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** A local Redis Cluster: three masters, no replicas. */
export interface LocalCluster {
  readonly ports: ReadonlyArray<number>
  readonly nodes: ReadonlyArray<{ readonly host: string; readonly port: number }>
  readonly stop: () => void
}

/**
 * Starts three `redis-server --cluster-enabled yes` nodes and joins them with `redis-cli --cluster create`.
 */
export const startCluster = async (): Promise<LocalCluster> => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-cluster-"))
  const ports = await freePorts(3)
  const stop = () => {
    for (const port of ports) {
      try {
        cli(port, "shutdown", "nosave")
      } catch {
        // already down
      }
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    for (const port of ports) {
      const nodeDir = join(dir, String(port))
      mkdirSync(nodeDir)
      execFileSync("redis-server", [
        "--port",
        String(port),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(nodeDir, "nodes.conf"),
        "--dir",
        nodeDir,
        "--save",
        "",
        "--appendonly",
        "no",
        "--bind",
        "127.0.0.1",
        "--daemonize",
        "yes",
        "--logfile",
        join(nodeDir, "log")
      ])
    }
    for (const port of ports) await waitFor(`node ${port}`, () => cli(port, "ping").trim() === "PONG")
    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...ports.map((port) => `127.0.0.1:${port}`), "--cluster-replicas", "0"],
      { input: "yes\n", encoding: "utf8", timeout: 30_000 }
    )
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`)
    for (const port of ports) {
      await waitFor(`cluster state on ${port}`, () => cli(port, "cluster", "info").includes("cluster_state:ok"))
    }
    return { ports, nodes: ports.map((port) => ({ host: "127.0.0.1", port })), stop }
  } catch (error) {
    stop()
    throw error
  }
}

/** A single Redis server a test may crash (SIGKILL) and start again on the same folder. */
export interface LocalServer {
  readonly port: number
  readonly url: string
  readonly dir: string
  readonly start: () => Promise<void>
  /** SIGKILL: no shutdown, no final fsync. */
  readonly kill: () => void
  readonly stop: () => void
}

/**
 * Starts a server on a free port, its data in a temporary folder that outlives a kill: with the append-only file
 * (`appendfsync` as given) or with no persistence at all (`appendonly no`, no snapshots).
 */
const startServer = async (appendfsync: "always" | "everysec" | null): Promise<LocalServer> => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-aof-"))
  const [port] = await freePorts(1)
  const pidFile = join(dir, "redis.pid")
  const start = async () => {
    const child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        ...(appendfsync === null ? ["--appendonly", "no"] : ["--appendonly", "yes", "--appendfsync", appendfsync]),
        "--save",
        "",
        "--pidfile",
        pidFile,
        "--daemonize",
        "yes",
        "--logfile",
        join(dir, "log")
      ],
      { stdio: "ignore" }
    )
    await new Promise((resolve) => child.once("exit", resolve))
    await waitFor(`server ${port}`, () => cli(port!, "ping").trim() === "PONG")
  }
  const pid = (): number | undefined =>
    existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8").trim()) || undefined : undefined
  const kill = () => {
    const p = pid()
    if (p !== undefined) {
      try {
        process.kill(p, "SIGKILL")
      } catch {
        // gone already
      }
    }
    rmSync(pidFile, { force: true })
  }
  await start()
  return {
    port: port!,
    url: `redis://127.0.0.1:${port}`,
    dir,
    start,
    kill,
    stop: () => {
      try {
        cli(port!, "shutdown", "nosave")
      } catch {
        kill()
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A server with `appendonly yes` and the given `appendfsync`. */
export const startAofServer = (appendfsync: "always" | "everysec"): Promise<LocalServer> => startServer(appendfsync)

/** A server that keeps nothing on disk. */
export const startPlainServer = (): Promise<LocalServer> => startServer(null)
