/**
 * The processes the chaos harness and the soak run beside their servers: the model server whose ledger is the
 * ground truth, and a pool of `slowcall serve --demo --demo-model-url` processes (API, worker and sweeper each),
 * started, stopped with a signal and started again on the same slot.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createWriteStream } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import type { LedgerEntry } from "./Check.js"

/** The repository's root and the CLI the pool runs. */
export const repoRoot = new URL("../../../", import.meta.url).pathname
const bin = join(repoRoot, "packages/cli/bin/slowcall.mjs")

/** The model server: every call is in `ledger` from the moment it arrives, billed whatever happens next. */
export interface ModelServer {
  readonly url: string
  readonly ledger: Array<LedgerEntry>
  /** Calls `listener` with every call from now on, until the returned function is called. */
  readonly onCall: (listener: (entry: LedgerEntry) => void) => () => void
  readonly close: () => Promise<void>
}

/**
 * The model server: bills every call on receipt (`now()` stamps it), answers `latencyMs()` later with the cost the
 * caller asked for.
 */
export const startModel = async (options: {
  readonly now: () => number
  readonly latencyMs: () => number
}): Promise<ModelServer> => {
  const ledger: Array<LedgerEntry> = []
  const listeners = new Set<(entry: LedgerEntry) => void>()
  const server: Server = createServer((request, response) => {
    let body = ""
    request.on("data", (chunk) => {
      body += chunk
    })
    request.on("end", () => {
      const call = JSON.parse(body) as { jobId: string; token: number; pid: number; costCents: number }
      const entry = {
        jobId: call.jobId,
        token: call.token,
        pid: call.pid,
        costCents: call.costCents,
        startedAt: options.now()
      }
      ledger.push(entry)
      for (const listener of listeners) listener(entry)
      setTimeout(() => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({ costCents: call.costCents }))
      }, options.latencyMs())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/call`,
    ledger,
    onCall: (listener) => {
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** One worker slot: a `serve` process, started again on the same slot after each stop. */
export interface Slot {
  readonly index: number
  child: ChildProcess | undefined
  /** The API's base URL while the process serves; undefined while it is down or stopping. */
  url: string | undefined
  pid: number
  exited: Promise<void>
}

/** What the pool's processes run on. */
export interface PoolOptions {
  readonly count: number
  /** The Store's URL slot `index` connects to (through its own fault proxy, in the chaos harness). */
  readonly storeUrl: (index: number) => string
  readonly onRedis: boolean
  readonly schema: string
  readonly sqs?: { readonly queueUrl: string; readonly endpoint: string } | undefined
  readonly modelUrl: string
  /** Where each slot's stdout and stderr go (`worker-<index>.log`). */
  readonly logs: string
  readonly say: (line: string) => void
  /** Node options before the CLI (e.g. `--import` of a sampler). */
  readonly nodeArgs?: ReadonlyArray<string> | undefined
  /** `serve --log-level` (default warn: failed attempts, recovered leases, dead letters). */
  readonly logLevel?: "warn" | "info" | undefined
  /** Options after `serve` besides the store's, the model's and the port. */
  readonly serveArgs?: ReadonlyArray<string> | undefined
  /** Messages a process sends on its IPC channel (only with `nodeArgs` that send any). */
  readonly onMessage?: ((slot: Slot, message: unknown) => void) | undefined
}

/** The pool: its slots, and the start and stop of one. */
export interface Pool {
  readonly slots: ReadonlyArray<Slot>
  /** Starts the slot's process and resolves once it serves (at most 90 s). */
  readonly start: (slot: Slot) => Promise<void>
  /** Sends `signal` (after a SIGCONT, for a paused one), SIGKILL after 30 s, and resolves once it exited. */
  readonly stop: (slot: Slot, signal: NodeJS.Signals) => Promise<void>
  readonly stopAll: () => Promise<void>
}

/** A pool of `count` slots, none started. */
export const pool = (options: PoolOptions): Pool => {
  const slots: Array<Slot> = Array.from({ length: options.count }, (_, index) => ({
    index,
    child: undefined,
    url: undefined,
    pid: 0,
    exited: Promise.resolve()
  }))

  const start = async (slot: Slot) => {
    const storeUrl = options.storeUrl(slot.index)
    const store = options.onRedis
      ? ["--redis-url", storeUrl, "--schema", options.schema]
      : ["--database-url", storeUrl, "--schema", options.schema]
    const sqs =
      options.sqs === undefined ? [] : ["--sqs-queue-url", options.sqs.queueUrl, "--sqs-endpoint", options.sqs.endpoint]
    const child = spawn(
      process.execPath,
      [
        ...(options.nodeArgs ?? []),
        bin,
        "serve",
        "--demo",
        "--demo-model-url",
        options.modelUrl,
        "--port",
        "0",
        "--log-level",
        options.logLevel ?? "warn",
        ...store,
        ...sqs,
        ...(options.serveArgs ?? [])
      ],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          NO_COLOR: "1",
          AWS_REGION: "us-east-1",
          AWS_ACCESS_KEY_ID: "test",
          AWS_SECRET_ACCESS_KEY: "test",
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
        },
        stdio: options.onMessage === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "ipc"]
      }
    )
    const onMessage = options.onMessage
    if (onMessage !== undefined) child.on("message", (message) => onMessage(slot, message))
    const log = createWriteStream(join(options.logs, `worker-${slot.index}.log`), { flags: "a" })
    child.stderr!.pipe(log)
    slot.child = child
    slot.pid = child.pid ?? 0
    slot.exited = new Promise((resolve) => child.once("exit", () => resolve()))
    void slot.exited.then(() => {
      if (slot.child === child) slot.url = undefined
    })
    const url = await new Promise<string>((resolve, reject) => {
      let out = ""
      const timer = setTimeout(
        () => reject(new Error(`worker ${slot.index} did not start in 90 s (see ${options.logs})`)),
        90_000
      )
      child.stdout!.on("data", (chunk) => {
        out += chunk
        log.write(chunk)
        const match = /slowcall is serving (http:\/\/[^/\s]+)\//.exec(out)
        if (match) {
          clearTimeout(timer)
          resolve(match[1]!)
        }
      })
      child.once("exit", (code, signal) => {
        clearTimeout(timer)
        reject(new Error(`worker ${slot.index} exited at start (${code ?? signal}); see ${options.logs}`))
      })
    })
    slot.url = url
    options.say(`worker ${slot.index} up (pid ${slot.pid}) at ${url}`)
  }

  const stop = async (slot: Slot, signal: NodeJS.Signals) => {
    const child = slot.child
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    slot.url = undefined
    child.kill("SIGCONT")
    child.kill(signal)
    const forced = setTimeout(() => child.kill("SIGKILL"), 30_000)
    await slot.exited
    clearTimeout(forced)
  }

  return {
    slots,
    start,
    stop,
    stopAll: async () => {
      await Promise.all(slots.map((slot) => stop(slot, "SIGTERM")))
    }
  }
}

/**
 * One try of a client's submit of a `demo.model` job under its idempotency key: the job id once the server
 * acknowledged it; undefined for what a client tries again with the same key (a timeout, a lost connection, a 5xx,
 * 408 or 429); throws on any other refusal, which no retry can mend.
 */
export const submitOnce = async (baseUrl: string, key: string, body: string): Promise<string | undefined> => {
  let response: Response
  try {
    response = await fetch(`${baseUrl}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body,
      signal: AbortSignal.timeout(5_000)
    })
  } catch {
    return undefined
  }
  try {
    if (response.status === 200 || response.status === 202) return ((await response.json()) as { id: string }).id
    const text = await response.text()
    if (response.status < 500 && response.status !== 429 && response.status !== 408) {
      throw new Error(`submit ${key}: ${response.status} ${text}`)
    }
  } catch (error) {
    if ((error as Error).message.startsWith("submit ")) throw error
  }
  return undefined
}
