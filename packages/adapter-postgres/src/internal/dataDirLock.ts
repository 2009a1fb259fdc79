/**
 * One process per PGlite data directory. PGlite runs Postgres inside the process that opens it, with no server to
 * arbitrate: two processes on one directory each keep their own copy of the data in memory and overwrite each
 * other's files, so jobs submitted to one never reach the other and a restart keeps only one side's writes.
 *
 * The holder is named by a lock file in the directory (`slowcall.lock`, one JSON line: pid, host, the process's start
 * time as the kernel reports it, a random nonce, when it was taken). It is created whole and atomically: written
 * under a private name, then hard-linked to the lock's name, which fails when the lock exists (or, where links are
 * not supported, created with O_EXCL). A lock is stale, and taken over, when its process is gone, or when its pid now
 * belongs to a process that started at another time (the pid was reused after a crash); a lock of another host is
 * never taken over, since its process cannot be checked from here. A stale lock is moved aside under a private name
 * before it is deleted, and put back if what was moved turns out to be a newer holder's lock, so two processes that
 * find the same stale lock cannot both take the directory. Released when the holder's scope closes, and at the
 * latest when the process exits; a holder killed outright leaves a lock the next opener finds stale.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { hostname } from "node:os"
import * as path from "node:path"

/** The lock file's name inside the data directory. @internal */
export const lockFileName = "slowcall.lock"

/** What a lock file says about its holder. @internal */
export interface Holder {
  readonly pid: number
  readonly host: string
  /** The process's start time (Linux: clock ticks after boot, field 22 of /proc/<pid>/stat); null where unknown. */
  readonly startTime: string | null
  readonly nonce: string
  /** When the lock was taken (ISO 8601). */
  readonly since: string
}

/** The result of `acquire`: the directory is this process's until `release`, or another holder has it. @internal */
export type Acquired =
  | { readonly _tag: "Acquired"; readonly file: string; readonly release: () => void }
  | { readonly _tag: "Locked"; readonly file: string; readonly holder: Holder }

/** The start time of a process as the kernel reports it, or null (not Linux, or no such process). @internal */
export const processStartTime = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing parenthesis,
    // where field 3 comes first and the start time is field 22.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

/** Whether the process a lock names still holds it. @internal */
export const isLive = (holder: Holder): boolean => {
  if (holder.host !== hostname()) return true
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
  }
  if (holder.startTime === null) return true
  const started = processStartTime(holder.pid)
  return started === null || started === holder.startTime
}

const parseHolder = (text: string): Holder | undefined => {
  try {
    const value = JSON.parse(text) as Partial<Holder>
    return typeof value.pid === "number" &&
      Number.isInteger(value.pid) &&
      value.pid > 0 &&
      typeof value.host === "string"
      ? {
          pid: value.pid,
          host: value.host,
          startTime: typeof value.startTime === "string" ? value.startTime : null,
          nonce: typeof value.nonce === "string" ? value.nonce : "",
          since: typeof value.since === "string" ? value.since : ""
        }
      : undefined
  } catch {
    return undefined
  }
}

const readText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

const ageMs = (file: string): number => {
  try {
    return Date.now() - fs.statSync(file).mtimeMs
  } catch {
    return Number.POSITIVE_INFINITY
  }
}

const pause = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Creates `file` with `text`, whole, unless it exists: false when it does. */
const createExclusive = (file: string, text: string, nonce: string): boolean => {
  const temp = `${file}.${process.pid}.${nonce}`
  fs.writeFileSync(temp, text)
  try {
    fs.linkSync(temp, file)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "EEXIST") return false
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw error
  } finally {
    fs.rmSync(temp, { force: true })
  }
  // No hard links here: O_EXCL create. A reader may see the file for a moment before its text: see `acquire`.
  try {
    fs.writeFileSync(file, text, { flag: "wx" })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  }
}

/** Removes the lock at `file` if it still reads `seen`; puts back a newer lock moved aside by mistake. */
const removeIfUnchanged = (file: string, seen: string, nonce: string): void => {
  const aside = `${file}.stale.${process.pid}.${nonce}`
  try {
    fs.renameSync(file, aside)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return
    throw error
  }
  if (readText(aside) !== seen) {
    try {
      fs.linkSync(aside, file)
    } catch {
      // Another process took the directory in the meantime: its lock stands.
    }
  }
  fs.rmSync(aside, { force: true })
}

/**
 * Takes the lock of `dataDir` (created if missing) for this process, or reports who holds it. Throws on a file
 * system error other than the lock's existence (no permission, read-only directory).
 *
 * @internal
 */
export const acquire = (dataDir: string): Acquired => {
  const dir = path.resolve(dataDir)
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, lockFileName)
  const me: Holder = {
    pid: process.pid,
    host: hostname(),
    startTime: processStartTime(process.pid),
    nonce: randomBytes(8).toString("hex"),
    since: new Date().toISOString()
  }
  const text = `${JSON.stringify(me)}\n`
  // Bounded: each turn either takes the lock, finds a live holder, or removes one stale lock.
  for (let turn = 0; turn < 20; turn++) {
    if (createExclusive(file, text, me.nonce)) {
      let held = true
      const release = () => {
        if (!held) return
        held = false
        process.removeListener("exit", release)
        const now = readText(file)
        if (now !== undefined && parseHolder(now)?.nonce === me.nonce) fs.rmSync(file, { force: true })
      }
      // A process that ends without closing its scope (process.exit) still hands the directory back.
      process.on("exit", release)
      return { _tag: "Acquired", file, release }
    }
    const seen = readText(file)
    if (seen === undefined) continue
    const holder = parseHolder(seen)
    if (holder === undefined) {
      // Only an O_EXCL create can be seen before its text is written: give a young unreadable lock time to finish.
      if (ageMs(file) < 2_000) {
        pause(100)
        continue
      }
    } else if (isLive(holder)) {
      return { _tag: "Locked", file, holder }
    }
    removeIfUnchanged(file, seen, me.nonce)
  }
  throw new Error(`could not take the lock ${file}: it kept changing hands`)
}
