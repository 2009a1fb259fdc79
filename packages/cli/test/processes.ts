/**
 * Test support: the `slowcall` executable run as a user runs it (`bin/slowcall.mjs`), as a one-shot command or as a
 * server that is waited for and stopped. Every process started here is stopped by `stop` (SIGINT, then SIGKILL after
 * 20 s); `stopAll` stops what a test file left running.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"

export const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname
export const repoRoot = new URL("../../../", import.meta.url).pathname

/** Runs `slowcall <args>` to its end. */
export const slowcall = (args: ReadonlyArray<string>, env: Record<string, string> = {}, timeout = 90_000) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, NO_COLOR: "1", ...env }, timeout },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      }
    )
  })

/** A started process with what it printed so far. */
export interface Running {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>
  /** SIGINT (or `signal`), then SIGKILL after 20 s; resolves when the process is gone. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | string>
}

const running = new Set<Running>()

/** Starts `node <argv>` with piped output. */
export const start = (argv: ReadonlyArray<string>, env: Record<string, string> = {}): Running => {
  const child = spawn(process.execPath, argv, {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (chunk) => {
    out += chunk
  })
  child.stderr!.on("data", (chunk) => {
    err += chunk
  })
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"))
  )
  const handle: Running = {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async (signal = "SIGINT") => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal)
        const forced = setTimeout(() => child.kill("SIGKILL"), 20_000)
        await exited
        clearTimeout(forced)
      }
      running.delete(handle)
      return exited
    }
  }
  running.add(handle)
  void exited.then(() => running.delete(handle))
  return handle
}

/** Waits until `test` holds for what the process printed (stdout and stderr), or fails with all of it. */
export const waitFor = async (
  process_: Running,
  test: (printed: { readonly stdout: string; readonly stderr: string }) => boolean,
  what: string,
  timeoutMs = 90_000
): Promise<void> => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (test({ stdout: process_.stdout(), stderr: process_.stderr() })) return
    if (process_.child.exitCode !== null || process_.child.signalCode !== null) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`waited for ${what}; got\nstdout:\n${process_.stdout()}\nstderr:\n${process_.stderr()}`)
}

/** `slowcall serve <args>` until it prints where it serves; its URL. */
export const serve = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const server = start([bin, "serve", ...args], env)
  let url = ""
  await waitFor(
    server,
    ({ stderr, stdout }) => {
      const match = /slowcall is serving (http:\/\/[^/\s"]+)\//.exec(stdout + stderr)
      if (match) url = match[1]!
      return match !== null
    },
    "the server to start"
  )
  return { ...server, url }
}

/** Stops every process a test file started and left running. */
export const stopAll = async () => {
  await Promise.all([...running].map((handle) => handle.stop()))
}
