/**
 * What a server that could not start says: one line naming what failed and what to do about it. A busy port names
 * the process listening on it when this machine can tell (Linux: the socket's inode in /proc/net/tcp*, then the
 * process whose file descriptors hold it); a locked data directory names its holder; an unreachable database or
 * Redis names its URL without the password.
 *
 * @internal
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import * as Redact from "@slowcall/core/Redact"
import { CliError } from "../CliError.js"
import { errorText } from "./log.js"

/** The errors of a chain: the error, its `cause`, its cause's `cause`, and so on (at most 8). */
const chain = (error: unknown): ReadonlyArray<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  let current: unknown = error
  while (typeof current === "object" && current !== null && out.length < 8) {
    out.push(current as Record<string, unknown>)
    current = (current as { cause?: unknown }).cause
  }
  return out
}

const find = (error: unknown, test: (e: Record<string, unknown>) => boolean) => chain(error).find(test)

/**
 * A URL as it may be shown: the password replaced, and anything that does not parse as a URL not shown at all.
 *
 * @internal
 */
export const safeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return "(a URL that does not parse)"
  }
}

/** Socket inodes listening on `port` (IPv4 and IPv6), from /proc/net/tcp and tcp6. */
const listeningInodes = (port: number): Set<string> => {
  const inodes = new Set<string>()
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string
    try {
      text = readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      const local = fields[1]
      // state 0A: LISTEN
      if (local === undefined || fields[3] !== "0A") continue
      if (Number.parseInt(local.slice(local.lastIndexOf(":") + 1), 16) === port && fields[9] !== undefined) {
        inodes.add(fields[9])
      }
    }
  }
  return inodes
}

/**
 * The process listening on TCP `port` on this machine, best effort: Linux only, and only a process whose file
 * descriptors this user may read. Looks at no more than a few thousand processes.
 *
 * @internal
 */
export const portHolder = (port: number): { readonly pid: number; readonly command: string } | undefined => {
  const inodes = listeningInodes(port)
  if (inodes.size === 0) return undefined
  let pids: Array<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return undefined
  }
  for (const pid of pids.slice(0, 5_000)) {
    let fds: Array<string>
    try {
      fds = readdirSync(`/proc/${pid}/fd`)
    } catch {
      continue
    }
    for (const fd of fds) {
      let target: string
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`)
      } catch {
        continue
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
      if (inode !== undefined && inodes.has(inode)) {
        let command = ""
        try {
          command = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()
        } catch {
          // the process ended meanwhile
        }
        // A command line may carry credentials (a database URL with its password): redacted, and cut short.
        command = Redact.redact(command)
        return { pid: Number(pid), command: command.length > 80 ? `${command.slice(0, 79)}…` : command }
      }
    }
  }
  return undefined
}

/**
 * Where a server was asked to listen and keep its data, for the messages.
 *
 * @internal
 */
export interface Target {
  readonly port: number
  readonly host: string
  readonly databaseUrl?: string | undefined
  readonly redisUrl?: string | undefined
  readonly dataDir: string
  readonly memory?: boolean | undefined
  readonly sqsQueueUrl?: string | undefined
}

/**
 * The one-line `CliError` for a server that could not start, from whatever its layers failed with.
 *
 * @internal
 */
export const describe = (error: unknown, target: Target, holder = portHolder): CliError => {
  const message = (text: string) => new CliError({ message: text })
  const locked = find(error, (e) => e._tag === "DataDirLocked")
  if (locked !== undefined) {
    return message(`${String(locked.message)}: stop that process first, or give this one another --data-dir`)
  }
  const system = find(error, (e) => typeof e.code === "string" && typeof e.syscall === "string")
  if (system !== undefined && system.syscall === "listen") {
    const where = `${target.host}:${target.port}`
    switch (system.code) {
      case "EADDRINUSE": {
        const by = holder(target.port)
        return message(
          `cannot listen on ${where}: the port is in use` +
            (by === undefined ? "" : ` by process ${by.pid}${by.command === "" ? "" : ` (${by.command})`}`) +
            "; stop that process, or pick another port with --port (0 picks a free one)"
        )
      }
      case "EACCES":
        return message(`cannot listen on ${where}: permission denied (ports below 1024 need privileges); use --port`)
      case "EADDRNOTAVAIL":
        return message(`cannot listen on ${where}: ${target.host} is not an address of this machine; check --host`)
    }
  }
  // A driver's words may quote a connection string or a header: redacted like a log line.
  const text = Redact.redact(errorText(error))
  const store = find(error, (e) => e._tag === "StoreError" || e._tag === "TransportError")
  const unreachable = store !== undefined && (store.reason === "Connection" || store.reason === "Timeout")
  const detail = store === undefined ? text : Redact.redact(String(store.detail ?? store.message))
  if (target.memory !== true && target.sqsQueueUrl !== undefined && store?._tag === "TransportError") {
    return message(
      `cannot use the SQS queue ${safeUrl(target.sqsQueueUrl)}: ${detail}; check --sqs-queue-url, the region and credentials`
    )
  }
  if (target.memory !== true && target.redisUrl !== undefined) {
    return message(
      unreachable
        ? `cannot reach Redis at ${safeUrl(target.redisUrl)}: ${detail}; is it running, and is --redis-url right?`
        : `Redis at ${safeUrl(target.redisUrl)} failed at start: ${detail}`
    )
  }
  if (target.memory !== true && target.databaseUrl !== undefined) {
    return message(
      unreachable
        ? `cannot reach Postgres at ${safeUrl(target.databaseUrl)}: ${detail}; is it running, and is --database-url (DATABASE_URL) right?`
        : `Postgres at ${safeUrl(target.databaseUrl)} failed at start: ${detail}`
    )
  }
  if (target.memory !== true && (store !== undefined || system !== undefined)) {
    return message(`cannot open the PGlite data directory ${target.dataDir}: ${detail}`)
  }
  return message(`could not start: ${text}`)
}
