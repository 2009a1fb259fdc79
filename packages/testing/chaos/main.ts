import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FaultProxy from "../src/FaultProxy.js"
import { check, type FaultKind, type FaultRecord, failures, type StoredJob } from "./Check.js"
import * as Processes from "./Processes.js"
import * as Servers from "./Servers.js"

const backends = ["pg", "redis", "pg+sqs", "redis+sqs"] as const
const faultKinds: ReadonlyArray<FaultKind> = [
  "kill",
  "term",
  "pause",
  "db-outage",
  "connection-reset",
  "blackhole",
  "stall",
  "sqs-restart"
]
type Backend = (typeof backends)[number]

interface Args {
  readonly backend: Backend
  readonly jobs: number
  readonly workers: number
  readonly minutes: number
  readonly seed: number
  readonly json: boolean
  readonly redisFsync: "always" | "everysec"
  readonly settleSeconds: number
  /** The fault kinds drawn from (all, unless `--faults` names some). */
  readonly faults: ReadonlyArray<FaultKind> | undefined
}

/** The ports this harness's own servers take. */
const ports = { postgres: 55432, redis: 6390, sqs: 4590 }
/** `demo.model`'s lease: its 5 s call timeout plus the 1 s margin (`Lease.leaseFor`). */
const leaseMs = 6_000
/**
 * The longest a stall holds a worker's database traffic: beyond the longest lease a claim can grant (`demo.echo`'s
 * 31 s, when the Store picks the job) plus a sweep and a claim.
 */
const stallMaxMs = 45_000

const usage = `usage: npm run chaos -- --backend pg|redis|pg+sqs|redis+sqs [--jobs N] [--workers W] [--minutes M] [--seed S] [--json]
  [--redis-fsync always|everysec] [--settle-seconds S] [--faults KIND,...]`

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const values = new Map<string, string>()
  const flags = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}\n${usage}`)
    if (arg === "--json") flags.add("json")
    else values.set(arg.slice(2), argv[++i] ?? "")
  }
  const number = (name: string, fallback: number, min: number) => {
    const raw = values.get(name)
    const value = raw === undefined ? fallback : Number(raw)
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} must be a number >= ${min}\n${usage}`)
    return value
  }
  const backend = (values.get("backend") ?? "pg") as Backend
  if (!backends.includes(backend as Backend)) throw new Error(`--backend ${backend}?\n${usage}`)
  const redisFsync = values.get("redis-fsync") ?? "everysec"
  if (redisFsync !== "always" && redisFsync !== "everysec") throw new Error(`--redis-fsync ${redisFsync}?\n${usage}`)
  for (const name of values.keys()) {
    if (!["backend", "jobs", "workers", "minutes", "seed", "redis-fsync", "settle-seconds", "faults"].includes(name)) {
      throw new Error(`unknown option --${name}\n${usage}`)
    }
  }
  const faults = values
    .get("faults")
    ?.split(",")
    .filter((kind) => kind !== "") as Array<FaultKind> | undefined
  for (const kind of faults ?? []) {
    if (!faultKinds.includes(kind)) throw new Error(`--faults: ${kind}? (${faultKinds.join(", ")})\n${usage}`)
  }
  return {
    backend,
    faults,
    jobs: Math.floor(number("jobs", 300, 1)),
    workers: Math.floor(number("workers", 3, 2)),
    minutes: number("minutes", 2, 0.1),
    seed: Math.floor(number("seed", Math.floor(Math.random() * 1_000_000), 0)),
    json: flags.has("json"),
    redisFsync,
    settleSeconds: number("settle-seconds", 120, 1)
  }
}

/** mulberry32: a small seeded generator, so that a seed draws the same schedule every time. */
const seeded = (seed: number) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
  return {
    next,
    between: (min: number, max: number) => Math.floor(min + next() * (max - min + 1)),
    pick: <A>(items: ReadonlyArray<A>): A => items[Math.floor(next() * items.length)]!
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const started = Date.now()
/** The harness clock: ms since it started. */
const now = () => Date.now() - started

/**
 * Whether a chunk a worker sends its database carries a `demo.model` result (`{"costCents":N,"token":T}`, its quotes
 * escaped or not): the write of a successful outcome, on Postgres (a settle's parameters) and Redis (a script's
 * arguments) alike. No other write carries a result.
 */
const carriesResult = (chunk: Buffer): boolean =>
  /costCents\\*"\s*:\s*\d+\s*,\s*\\*"token\\*"\s*:\s*\d+/.test(chunk.toString("latin1"))

/** The job ids (UUIDs) a chunk names. */
const jobIdsIn = (chunk: Buffer): Array<string> =>
  chunk.toString("latin1").match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? []

/** The fields of the API's job view the checks read. */
interface JobView {
  readonly id: string
  readonly state: string
  readonly costCents: number
  readonly result: unknown
}

/** A job as the checks see it: `demo.model`'s result names the lease token it was made under. */
const stored = (view: JobView): StoredJob => {
  const token = (view.result as { token?: unknown } | null)?.token
  return {
    id: view.id,
    state: view.state,
    costCents: view.costCents,
    resultToken: typeof token === "number" ? token : undefined
  }
}

const main = async () => {
  const args = parseArgs(process.argv.slice(2))
  const say = (line: string) => {
    if (!args.json) console.log(`[${(now() / 1000).toFixed(1)} s] ${line}`)
    else console.error(`[${(now() / 1000).toFixed(1)} s] ${line}`)
  }
  const schedule = seeded(args.seed)
  const modelRandom = seeded(args.seed + 1)
  // Answers 0.3-3 s after a call (within `demo.model`'s 5 s timeout).
  const model = await Processes.startModel({ now, latencyMs: () => modelRandom.between(300, 3_000) })
  const clientRandom = seeded(args.seed + 2)
  const logs = mkdtempSync(join(tmpdir(), "slowcall-chaos-logs-"))
  const cleanups: Array<() => Promise<void>> = [async () => model.close()]

  const onRedis = args.backend.startsWith("redis")
  say(`backend ${args.backend}, seed ${args.seed}, ${args.jobs} jobs, ${args.workers} workers, ${args.minutes} min`)
  const database = onRedis ? await Servers.redis(ports.redis, args.redisFsync) : await Servers.postgres(ports.postgres)
  cleanups.push(database.destroy)
  const emulator = args.backend.endsWith("+sqs") ? await Servers.sqs(ports.sqs, "chaos") : undefined
  if (emulator !== undefined) cleanups.push(emulator.destroy)
  const databasePort = onRedis ? ports.redis : ports.postgres

  // One fault proxy per slot, between its process and the database.
  const proxies: Array<FaultProxy.FaultProxy> = []
  for (let index = 0; index < args.workers; index++) {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: databasePort })
    cleanups.push(proxy.close)
    proxies.push(proxy)
  }
  const workers = Processes.pool({
    count: args.workers,
    storeUrl: (index) => proxies[index]!.url(database.url),
    onRedis,
    schema: "chaos",
    sqs: emulator === undefined ? undefined : { queueUrl: emulator.queueUrl, endpoint: emulator.url },
    modelUrl: model.url,
    logs,
    say
  })
  const slots = workers.slots
  cleanups.push(workers.stopAll)

  try {
    // The first process migrates alone; the others start together.
    await workers.start(slots[0]!)
    await Promise.all(slots.slice(1).map(workers.start))

    // The run's clock starts once every process serves.
    const runMs = args.minutes * 60_000
    const faultsUntil = now() + runMs * 0.75
    const faults: Array<FaultRecord> = []
    const record = (fault: FaultRecord) => {
      faults.push(fault)
      say(`fault ${fault.kind}${fault.pid === undefined ? "" : ` pid ${fault.pid}`}`)
    }

    // The client: each job submitted at its time, retried with the same key until acknowledged (at most 3 min).
    const submissions = Array.from({ length: args.jobs }, (_, i) => ({
      key: `chaos-${args.seed}-${i}`,
      costCents: schedule.between(1, 3),
      acknowledgedIds: [] as Array<string>,
      tries: 0
    }))
    const submitOne = async (submission: (typeof submissions)[number]) => {
      const body = JSON.stringify({
        type: "demo.model",
        input: { text: submission.key, costCents: submission.costCents }
      })
      const until = Date.now() + 180_000
      while (Date.now() < until) {
        const live = slots.filter((slot) => slot.url !== undefined)
        if (live.length === 0) {
          await sleep(200)
          continue
        }
        const slot = clientRandom.pick(live)
        submission.tries += 1
        const id = await Processes.submitOnce(slot.url!, submission.key, body)
        if (id !== undefined) {
          submission.acknowledgedIds.push(id)
          return
        }
        await sleep(300)
      }
    }
    const submitWindow = runMs * 0.6
    const client = Promise.all(
      submissions.map(async (submission, i) => {
        await sleep((i * submitWindow) / args.jobs)
        await submitOne(submission)
      })
    )

    // The faults: one at a time, each kind once before any repeats (order from the seed), until 75% of the run.
    const kinds = faultKinds.filter(
      (kind) =>
        (args.faults === undefined || args.faults.includes(kind)) && (kind !== "sqs-restart" || emulator !== undefined)
    )
    let bag: Array<FaultKind> = []
    await sleep(Math.min(5_000, runMs * 0.1))
    while (now() < faultsUntil) {
      if (kinds.length === 0) break
      if (bag.length === 0) bag = [...kinds].sort(() => schedule.next() - 0.5)
      const kind = bag.shift()!
      const slot = schedule.pick(slots)
      const gapMs = schedule.between(2_000, 8_000)
      const live = slot.url !== undefined
      switch (kind) {
        case "kill":
        case "term": {
          if (!live) break
          record({ kind, pid: slot.pid, at: now() })
          await workers.stop(slot, kind === "kill" ? "SIGKILL" : "SIGTERM")
          await sleep(schedule.between(500, 3_000))
          await workers.start(slot)
          break
        }
        case "pause": {
          if (!live) break
          const at = now()
          slot.child!.kill("SIGSTOP")
          await sleep(leaseMs + schedule.between(1_000, 5_000))
          slot.child!.kill("SIGCONT")
          record({ kind, pid: slot.pid, at, until: now() })
          break
        }
        case "db-outage": {
          const at = now()
          await database.crash()
          say(`database down`)
          await sleep(schedule.between(5_000, 30_000))
          await database.start()
          record({ kind, at, until: now() })
          break
        }
        case "sqs-restart": {
          const at = now()
          await emulator!.crash()
          await sleep(schedule.between(500, 3_000))
          await emulator!.start()
          record({ kind, at, until: now() })
          break
        }
        case "connection-reset": {
          record({ kind, pid: slot.pid, at: now() })
          proxies[slot.index]!.resetAll()
          break
        }
        case "stall": {
          // The worker's network to the database stalls the moment it sends a successful outcome: that write and
          // everything after it waits in the proxy until another process calls the model for one of the written jobs
          // (its lease ran out and it was taken over), or at most `stallMaxMs`; then it all arrives at once. A Store
          // that fences the settle by its token refuses the late write; one that does not lets it overwrite the
          // new holder's job (a stale settlement).
          if (!live) break
          let began: number | undefined
          let written: Array<string> = []
          const rule = proxies[slot.index]!.addHoldRule({
            match: (chunk) => {
              if (!carriesResult(chunk)) return false
              written = jobIdsIn(chunk)
              return true
            },
            onHold: () => {
              began = now()
            }
          })
          const armedUntil = now() + 15_000
          while (began === undefined && now() < armedUntil && slot.url !== undefined) await sleep(100)
          rule.cancel()
          if (began === undefined) break
          const stalledPid = slot.pid
          say(`stall: worker ${slot.index} (pid ${stalledPid}) held writing the outcome of ${written.join(", ")}`)
          let takenOver = false
          const stop = model.onCall((entry) => {
            if (entry.pid !== stalledPid && written.includes(entry.jobId)) takenOver = true
          })
          const until = began + stallMaxMs
          while (!takenOver && now() < until) await sleep(50)
          stop()
          proxies[slot.index]!.setHold(false)
          say(`stall released after ${now() - began} ms, ${takenOver ? "the job taken over" : "no takeover"}`)
          record({ kind, pid: stalledPid, at: began, until: now() })
          break
        }
        case "blackhole": {
          const at = now()
          proxies[slot.index]!.setBlackhole(true)
          await sleep(leaseMs + schedule.between(1_000, 5_000))
          proxies[slot.index]!.setBlackhole(false)
          record({ kind, pid: slot.pid, at, until: now() })
          break
        }
      }
      await sleep(gapMs)
    }

    await client
    const acknowledged = submissions.filter((s) => s.acknowledgedIds.length > 0)
    say(`client done: ${acknowledged.length}/${submissions.length} acknowledged`)

    // Settle: every acknowledged job terminal, or the deadline.
    const api = async (path: string): Promise<{ status: number; body: unknown }> => {
      for (let attempt = 0; attempt < 50; attempt++) {
        const live = slots.filter((slot) => slot.url !== undefined)
        if (live.length > 0) {
          try {
            const response = await fetch(`${clientRandom.pick(live).url}${path}`, {
              signal: AbortSignal.timeout(10_000)
            })
            if (response.status < 500) return { status: response.status, body: await response.json() }
          } catch {
            // another process, or the same one again
          }
        }
        await sleep(500)
      }
      throw new Error(`GET ${path}: no answer`)
    }
    const terminal = new Set(["succeeded", "failed", "abandoned"])
    let pending = acknowledged.flatMap((s) => s.acknowledgedIds)
    const settleUntil = now() + args.settleSeconds * 1_000
    while (pending.length > 0 && now() < settleUntil) {
      const still: Array<string> = []
      for (const id of pending) {
        const { body, status } = await api(`/v1/jobs/${id}`)
        if (status !== 200 || !terminal.has((body as StoredJob).state)) still.push(id)
      }
      pending = still
      if (pending.length > 0) {
        say(`${pending.length} job(s) not terminal yet`)
        await sleep(2_000)
      }
    }

    // The Store's view: every key's jobs, and every acknowledged id.
    const jobsByKey = new Map<string, Array<StoredJob>>()
    const missingIds = new Set<string>()
    for (const submission of submissions) {
      const { body } = await api(`/v1/jobs?requestKey=${encodeURIComponent(submission.key)}&limit=10`)
      const jobs = (body as { jobs: Array<JobView> }).jobs.map(stored)
      for (const id of submission.acknowledgedIds) {
        if (jobs.some((job) => job.id === id)) continue
        const { body: job, status } = await api(`/v1/jobs/${id}`)
        if (status === 404) missingIds.add(id)
        else jobs.push(stored(job as JobView))
      }
      jobsByKey.set(submission.key, jobs)
    }

    // With a transport that acks (SQS): every message it saw deleted, and when each acked job's outcome was stored.
    const acks = (emulator?.deleted() ?? []).flatMap((deleted) => {
      try {
        const jobId = (JSON.parse(deleted.body) as { jobId?: unknown }).jobId
        return typeof jobId === "string" ? [{ jobId, at: deleted.at - started }] : []
      } catch {
        return []
      }
    })
    const ackedIds = new Set(acks.map((ack) => ack.jobId))
    for (const jobs of jobsByKey.values()) {
      for (const [i, job] of jobs.entries()) {
        if (!ackedIds.has(job.id)) continue
        const { body, status } = await api(`/v1/jobs/${job.id}/detail`)
        if (status !== 200) continue
        const ends = (body as { attempts: Array<{ endedAt: string | null; outcome: string }> }).attempts
          .filter((attempt) => attempt.endedAt !== null && terminal.has(attempt.outcome))
          .map((attempt) => Date.parse(attempt.endedAt!) - started)
        if (ends.length > 0) jobs[i] = { ...job, terminalAt: Math.min(...ends) }
      }
    }

    const report = check({
      acks,
      backend: onRedis ? `${args.backend} (appendfsync ${args.redisFsync})` : args.backend,
      seed: args.seed,
      submissions,
      jobsByKey,
      missingIds,
      ledger: model.ledger,
      faults,
      callMaxMs: leaseMs
    })
    const red = failures(report)
    say(red.length === 0 ? "green: nothing lost, stuck, doubled without excuse, under-counted or duplicated" : "RED")
    for (const line of red) say(`  ${line}`)
    if (red.length > 0) say(`worker logs: ${logs}`)
    console.log(args.json ? JSON.stringify(report) : JSON.stringify(report, null, 2))
    process.exitCode = red.length === 0 ? 0 : 1
    if (red.length === 0) rmSync(logs, { recursive: true, force: true })
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup()
      } catch (error) {
        say(`cleanup: ${(error as Error).message}`)
      }
    }
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    console.error((error as Error).stack ?? String(error))
    process.exit(2)
  }
)
