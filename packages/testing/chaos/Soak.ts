/**
 * `npm run soak -- --minutes M --backend pg|redis|pg+sqs|redis+sqs [--json] [--workers W] [--concurrency C]
 * [--restart-minutes R] [--retention-minutes N] [--sample-seconds S] [--load F] [--pg-port P] [--redis-port P]
 * [--sqs-port P] [--redis-fsync always|everysec]`
 *
 * The shipped processes under steady load for a long time. The soak starts its own servers (`Servers.ts`: a
 * Postgres cluster, or a Redis with an append-only file, and the SQS emulator for the `+sqs` backends), the billing
 * model server and W `slowcall serve --demo` processes (`Processes.ts`). It measures the fleet's capacity with a
 * burst of jobs, then submits at `--load` (default 70%) of it for M minutes. Every R minutes one worker other than
 * worker 0 is stopped, SIGTERM and SIGKILL in turn, and started again; worker 0 lives the whole run, so its memory
 * is one process's over the whole run. Every S seconds it samples each worker's resident set, V8 heap and event-loop
 * delay (`sampler.mjs`, loaded with `--import`, over IPC), the oldest queued job's age (the API's `/metrics`) and the
 * Store's size (Postgres: the schema's tables with their indexes and TOAST; Redis: `used_memory`). Every worker runs
 * with `serve --retention N` (default 5 min, longer than a client retries a key), so finished jobs older than that are
 * purged by the shipped processes themselves, as in production; each purge is a line in the worker's log, and the
 * jobs the Store no longer has at the end are excused as purged only when the logs account for every one of them.
 * At the end every acknowledged job must be terminal and the chaos checks (`Check.ts`) must hold, then the slopes are
 * judged (`SoakStats.ts`), the Store's among them: once the retention has turned over twice its size must be flat
 * (bounded). Exit 1 when a check or a slope fails; with `--json` the last line is one object.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { check, type FaultRecord, failures, type StoredJob } from "./Check.js"
import * as Processes from "./Processes.js"
import * as Servers from "./Servers.js"
import * as SoakStats from "./SoakStats.js"

const run = promisify(execFile)
const backends = ["pg", "redis", "pg+sqs", "redis+sqs"] as const
type Backend = (typeof backends)[number]

interface Args {
  readonly backend: Backend
  readonly minutes: number
  readonly json: boolean
  readonly workers: number
  readonly concurrency: number
  readonly restartMinutes: number
  readonly retentionMinutes: number
  readonly sampleSeconds: number
  readonly load: number
  readonly pgPort: number
  readonly redisPort: number
  readonly sqsPort: number
  readonly redisFsync: "always" | "everysec"
}

const usage = `usage: npm run soak -- --minutes M --backend pg|redis|pg+sqs|redis+sqs [--json] [--workers W] [--concurrency C]
  [--restart-minutes R] [--retention-minutes N] [--sample-seconds S] [--load F] [--pg-port P] [--redis-port P]
  [--sqs-port P] [--redis-fsync always|everysec]`

const options = [
  "backend",
  "minutes",
  "workers",
  "concurrency",
  "restart-minutes",
  "retention-minutes",
  "sample-seconds",
  "load",
  "pg-port",
  "redis-port",
  "sqs-port",
  "redis-fsync"
]

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const values = new Map<string, string>()
  let json = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}\n${usage}`)
    if (arg === "--json") json = true
    else values.set(arg.slice(2), argv[++i] ?? "")
  }
  for (const name of values.keys()) {
    if (!options.includes(name)) throw new Error(`unknown option --${name}\n${usage}`)
  }
  const number = (name: string, fallback: number, min: number, maxValue = Number.POSITIVE_INFINITY) => {
    const raw = values.get(name)
    const value = raw === undefined ? fallback : Number(raw)
    if (!Number.isFinite(value) || value < min || value > maxValue) {
      throw new Error(`--${name} must be a number from ${min} to ${maxValue}\n${usage}`)
    }
    return value
  }
  const backend = (values.get("backend") ?? "pg") as Backend
  if (!backends.includes(backend)) throw new Error(`--backend ${backend}?\n${usage}`)
  const redisFsync = values.get("redis-fsync") ?? "everysec"
  if (redisFsync !== "always" && redisFsync !== "everysec") throw new Error(`--redis-fsync ${redisFsync}?\n${usage}`)
  // One set of ports per backend, so that a soak per backend can run at once (and beside the chaos harness).
  const offset = backends.indexOf(backend)
  return {
    backend,
    minutes: number("minutes", 2, 0.1),
    json,
    workers: Math.floor(number("workers", 2, 2)),
    concurrency: Math.floor(number("concurrency", 2, 1)),
    restartMinutes: number("restart-minutes", 3, 0.1),
    // Longer than the client retries a key (3 min): a key purged while its client still retried would make a second job.
    retentionMinutes: number("retention-minutes", 5, 3.5),
    sampleSeconds: number("sample-seconds", 10, 1),
    load: number("load", 0.7, 0.05, 1.5),
    pgPort: Math.floor(number("pg-port", 55510 + offset, 1024, 65535)),
    redisPort: Math.floor(number("redis-port", 6480 + offset, 1024, 65535)),
    sqsPort: Math.floor(number("sqs-port", 4680 + offset, 1024, 65535)),
    redisFsync
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const started = Date.now()
/** The harness clock: ms since it started. */
const now = () => Date.now() - started

/** The fields of the API's job view the checks read. */
interface JobView {
  readonly id: string
  readonly state: string
  readonly costCents: number
}

/** One sample of one worker process, as `sampler.mjs` sends it. */
interface ProcessSample {
  readonly kind: "sample"
  readonly rss: number
  readonly heapUsed: number
  readonly eventLoopP99Ms: number
}

/** The largest value of a metric over its label sets in a Prometheus text page; 0 when it has none. */
const metricMax = (page: string, name: string): number => {
  let out = 0
  for (const line of page.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== "{" && line[name.length] !== " ")) continue
    const value = Number(line.slice(line.lastIndexOf(" ") + 1))
    if (Number.isFinite(value)) out = Math.max(out, value)
  }
  return out
}

const main = async () => {
  const args = parseArgs(process.argv.slice(2))
  const say = (line: string) => {
    const text = `[${(now() / 1000).toFixed(1)} s] ${line}`
    if (args.json) console.error(text)
    else console.log(text)
  }
  const onRedis = args.backend.startsWith("redis")
  const schema = "soak"
  // Read by `sampler.mjs` in each worker (the pool passes this process's environment on).
  process.env.SLOWCALL_SOAK_SAMPLE_MS = String(args.sampleSeconds * 1000)
  const logs = mkdtempSync(join(tmpdir(), "slowcall-soak-logs-"))
  const cleanups: Array<() => Promise<void>> = []
  // Interrupted (Ctrl-C, SIGTERM, SIGHUP): the servers and workers go with it, not left running on their ports.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      say(`${signal}: stopping`)
      void runCleanups(cleanups, say).then(() => process.exit(130))
    })
  }
  // A closed stdout or stderr (a pipe to a reader that left) must not end the run without its cleanup.
  process.stdout.on("error", () => {})
  process.stderr.on("error", () => {})
  // The model: 300-900 ms a call, so the fleet's capacity is set by its concurrency rather than by the machine, and
  // a call ends well within `demo.model`'s 5 s timeout.
  const model = await Processes.startModel({ now, latencyMs: () => 300 + Math.floor(Math.random() * 600) })
  cleanups.push(model.close)
  say(
    `backend ${args.backend}, ${args.minutes} min, ${args.workers} workers x ${args.concurrency}, ` +
      `restart every ${args.restartMinutes} min, load ${args.load}` +
      `, serve --retention ${args.retentionMinutes} min`
  )
  const database = onRedis ? await Servers.redis(args.redisPort, args.redisFsync) : await Servers.postgres(args.pgPort)
  cleanups.push(database.destroy)
  const emulator = args.backend.endsWith("+sqs") ? await Servers.sqs(args.sqsPort, "soak") : undefined
  if (emulator !== undefined) cleanups.push(emulator.destroy)

  // Samples, per slot and process.
  const rssByPid = new Map<number, Array<SoakStats.Point>>()
  const heapByPid = new Map<number, Array<SoakStats.Point>>()
  const sentinelRss: Array<SoakStats.Point> = []
  const sentinelHeap: Array<SoakStats.Point> = []
  const eventLoopP99: Array<SoakStats.Point> = []
  const queueAge: Array<SoakStats.Point> = []
  const storeBytes: Array<SoakStats.Point> = []
  const latest = new Map<number, ProcessSample>()

  const workers = Processes.pool({
    count: args.workers,
    storeUrl: () => database.url,
    onRedis,
    schema,
    sqs: emulator === undefined ? undefined : { queueUrl: emulator.queueUrl, endpoint: emulator.url },
    modelUrl: model.url,
    logs,
    say,
    nodeArgs: ["--import", new URL("./sampler.mjs", import.meta.url).href],
    // Info: the retention's purges are logged there, one line per chunk.
    logLevel: "info",
    serveArgs: ["--concurrency", String(args.concurrency), "--retention", `${Math.round(args.retentionMinutes * 60)}s`],
    onMessage: (slot, message) => {
      const sample = message as ProcessSample
      if (sample.kind !== "sample") return
      const t = now()
      const push = (map: Map<number, Array<SoakStats.Point>>, value: number) => {
        const points = map.get(slot.pid) ?? []
        points.push({ t, value })
        map.set(slot.pid, points)
      }
      push(rssByPid, sample.rss)
      push(heapByPid, sample.heapUsed)
      eventLoopP99.push({ t, value: sample.eventLoopP99Ms })
      if (slot.index === 0) {
        sentinelRss.push({ t, value: sample.rss })
        sentinelHeap.push({ t, value: sample.heapUsed })
      }
      latest.set(slot.index, sample)
    }
  })
  cleanups.push(workers.stopAll)
  const slots = workers.slots

  /** How many jobs the workers' retention purged so far, from their logs (each log keeps every start of its slot). */
  const purgedByLogs = () => {
    let count = 0
    for (const slot of slots) {
      let text: string
      try {
        text = readFileSync(join(logs, `worker-${slot.index}.log`), "utf8")
      } catch {
        continue
      }
      for (const match of text.matchAll(/retention: purged (\d+) finished jobs/g)) count += Number(match[1])
    }
    return count
  }

  try {
    await workers.start(slots[0]!)
    await Promise.all(slots.slice(1).map(workers.start))
    const live = () => slots.filter((slot) => slot.url !== undefined)
    const pick = () => {
      const up = live()
      return up.length === 0 ? undefined : up[Math.floor(Math.random() * up.length)]
    }
    const api = async (path: string): Promise<{ status: number; body: unknown }> => {
      for (let attempt = 0; attempt < 60; attempt++) {
        const slot = pick()
        if (slot !== undefined) {
          try {
            const response = await fetch(`${slot.url}${path}`, { signal: AbortSignal.timeout(10_000) })
            if (response.status < 500) return { status: response.status, body: await response.json() }
          } catch {
            // another process, or the same one again
          }
        }
        await sleep(500)
      }
      throw new Error(`GET ${path}: no answer`)
    }
    /** Queued plus running jobs, from the API's totals. */
    const unfinished = async () => {
      let sum = 0
      for (const state of ["queued", "running"]) {
        const { body } = await api(`/v1/jobs?state=${state}&limit=1`)
        sum += (body as { total: number }).total
      }
      return sum
    }

    // The client: each job retried with its key until acknowledged (at most 3 min, shorter than the retention).
    const submissions: Array<{ key: string; acknowledgedIds: Array<string> }> = []
    let inFlight = 0
    const submit = async (index: number) => {
      const submission = { key: `soak-${started}-${index}`, acknowledgedIds: [] as Array<string> }
      submissions.push(submission)
      const body = JSON.stringify({ type: "demo.model", input: { text: submission.key, costCents: 1 + (index % 3) } })
      const until = Date.now() + 180_000
      inFlight += 1
      try {
        while (Date.now() < until) {
          const slot = pick()
          const id = slot === undefined ? undefined : await Processes.submitOnce(slot.url!, submission.key, body)
          if (id !== undefined) {
            submission.acknowledgedIds.push(id)
            return
          }
          await sleep(300)
        }
      } finally {
        inFlight -= 1
      }
    }
    const clients: Array<Promise<void>> = []

    // Capacity: a burst of ten jobs per worker slot at once, timed until none is queued or running.
    const burst = args.workers * args.concurrency * 10
    const burstStart = now()
    for (let i = 0; i < burst; i++) clients.push(submit(i))
    await Promise.all(clients)
    while ((await unfinished()) > 0) await sleep(250)
    const capacityPerSecond = burst / ((now() - burstStart) / 1000)
    const ratePerSecond = capacityPerSecond * args.load
    say(`capacity ${capacityPerSecond.toFixed(2)} jobs/s (burst of ${burst}); load ${ratePerSecond.toFixed(2)} jobs/s`)

    const startMs = now()
    const runMs = args.minutes * 60_000
    const endMs = startMs + runMs
    const faults: Array<FaultRecord> = []
    let stopping = false

    // The sampler: every S seconds, the Store's size and the oldest queued age (the processes send their own).
    const sampleStore = async (): Promise<number> => {
      if (onRedis) {
        const { stdout } = await run("redis-cli", ["-p", String(args.redisPort), "info", "memory"])
        const match = /^used_memory:(\d+)/m.exec(stdout)
        return Number(match?.[1] ?? Number.NaN)
      }
      const { stdout } = await run("psql", [
        database.url,
        "-Atc",
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c " +
          `JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '${schema}' AND c.relkind = 'r'`
      ])
      return Number(stdout.trim())
    }
    const sampler = (async () => {
      while (!stopping) {
        const t = now()
        try {
          const bytes = await sampleStore()
          if (Number.isFinite(bytes)) storeBytes.push({ t, value: bytes })
        } catch (error) {
          say(`store size: ${(error as Error).message}`)
        }
        const slot = pick()
        if (slot !== undefined) {
          try {
            const response = await fetch(`${slot.url}/metrics`, { signal: AbortSignal.timeout(10_000) })
            const page = response.ok ? await response.text() : ""
            // The age's gauge is absent while nothing is queued (age 0); a page without the job counts is no sample.
            if (page.includes("slowcall_jobs{")) {
              queueAge.push({ t, value: metricMax(page, "slowcall_oldest_queued_age_seconds") })
            }
          } catch {
            // the process went down under the request: the next sample reads another
          }
        }
        const w0 = latest.get(0)
        say(
          `${submissions.length} submitted, ${model.ledger.length} calls, ${inFlight} in flight; ` +
            `worker 0 rss ${w0 === undefined ? "?" : (w0.rss / 1e6).toFixed(1)} MB heap ${w0 === undefined ? "?" : (w0.heapUsed / 1e6).toFixed(1)} MB ` +
            `loop p99 ${w0 === undefined ? "?" : w0.eventLoopP99Ms.toFixed(1)} ms; ` +
            `oldest queued ${queueAge.at(-1)?.value.toFixed(1) ?? "?"} s; store ${((storeBytes.at(-1)?.value ?? 0) / 1e6).toFixed(2)} MB` +
            `; purged ${purgedByLogs()}`
        )
        const next = t + args.sampleSeconds * 1000
        while (!stopping && now() < next) await sleep(Math.min(500, Math.max(0, next - now())))
      }
    })()

    // Restarts: every R minutes one worker other than worker 0, SIGTERM and SIGKILL in turn.
    const restarts = (async () => {
      let turn = 0
      while (!stopping) {
        const next = now() + args.restartMinutes * 60_000
        while (!stopping && now() < next) await sleep(500)
        if (stopping || now() >= endMs) return
        const slot = slots[1 + (turn % (slots.length - 1))]!
        const kind = turn % 2 === 0 ? "term" : "kill"
        turn += 1
        faults.push({ kind, pid: slot.pid, at: now() })
        say(`restart: ${kind === "kill" ? "SIGKILL" : "SIGTERM"} worker ${slot.index} (pid ${slot.pid})`)
        await workers.stop(slot, kind === "kill" ? "SIGKILL" : "SIGTERM")
        await sleep(1_000)
        await workers.start(slot)
      }
    })()

    // The load: jobs at `ratePerSecond`, on a 100 ms tick, until the end.
    let index = burst
    while (now() < endMs) {
      const due = burst + Math.floor(((now() - startMs) / 1000) * ratePerSecond)
      while (index < due) clients.push(submit(index++))
      await sleep(100)
    }
    await Promise.all(clients)
    say(`load done: ${submissions.length} submitted`)

    // Settle: nothing queued or running (at most 3 min), then the Store's view of every key.
    const settleUntil = now() + 180_000
    while (now() < settleUntil && (await unfinished()) > 0) await sleep(1_000)
    const settledAt = now()
    stopping = true
    await Promise.all([sampler, restarts])

    const jobsByKey = new Map<string, Array<StoredJob>>()
    const missingIds = new Set<string>()
    const lookUp = async (submission: (typeof submissions)[number]) => {
      const { body } = await api(`/v1/jobs?requestKey=${encodeURIComponent(submission.key)}&limit=10`)
      const jobs: Array<StoredJob> = (body as { jobs: Array<JobView> }).jobs.map((view) => ({
        id: view.id,
        state: view.state,
        costCents: view.costCents
      }))
      for (const id of submission.acknowledgedIds) {
        if (jobs.some((job) => job.id === id)) continue
        const { body: job, status } = await api(`/v1/jobs/${id}`)
        if (status === 404) missingIds.add(id)
        else jobs.push({ id, state: (job as JobView).state, costCents: (job as JobView).costCents })
      }
      jobsByKey.set(submission.key, jobs)
    }
    for (let i = 0; i < submissions.length; i += 16) await Promise.all(submissions.slice(i, i + 16).map(lookUp))
    // The jobs the Store no longer has are the retention's when the workers' logs purged at least that many (read
    // after the look-ups, so a purge during them is counted); otherwise every one of them counts as lost.
    const purgedCount = purgedByLogs()
    const purged = missingIds.size <= purgedCount ? new Set(missingIds) : new Set<string>()
    say(`${missingIds.size} acknowledged jobs gone from the Store; the retention logged ${purgedCount} purged`)
    for (const id of purged) missingIds.delete(id)
    const acknowledged = submissions.map((s) => ({
      key: s.key,
      acknowledgedIds: s.acknowledgedIds.filter((id) => !purged.has(id))
    }))

    // The attempts the workers reported cut short (a lease not renewed in time, a model call timed out): a second
    // call of such a job is the retry or takeover its holder knew of, not two holders at once.
    const cutShort = new Set<string>()
    for (const slot of slots) {
      const text = readFileSync(join(logs, `worker-${slot.index}.log`), "utf8")
      for (const line of text.split("\n")) {
        if (!/lease could not be renewed in time|lease ended before the attempt|failed: timeout/.test(line)) continue
        const job = /jobId=(\S+)/.exec(line)?.[1]
        const token = /token=(\d+)/.exec(line)?.[1]
        if (job !== undefined && token !== undefined) cutShort.add(`${job}:${token}`)
      }
    }
    const report = check({
      cutShort,
      backend: onRedis ? `${args.backend} (appendfsync ${args.redisFsync})` : args.backend,
      seed: 0,
      submissions: acknowledged,
      jobsByKey,
      missingIds,
      ledger: model.ledger.filter((entry) => !purged.has(entry.jobId)),
      faults,
      callMaxMs: 6_000
    })
    const series: SoakStats.Series = {
      sentinelRss,
      sentinelHeap,
      rssByProcess: [...rssByPid.values()],
      heapByProcess: [...heapByPid.values()],
      eventLoopP99,
      queueAge,
      storeBytes
    }
    const window: SoakStats.Window = {
      startMs,
      endMs: Math.min(endMs, settledAt),
      warmupMs: Math.min(5 * 60_000, runMs / 5),
      retentionMs: args.retentionMinutes * 60_000
    }
    const slopes = SoakStats.slopes(series, window)
    const isJudged = SoakStats.judged(slopes)
    const red = [...failures(report), ...SoakStats.slopeFailures(slopes)]
    const finished = report.terminal + purged.size
    const storeBound =
      slopes.storeSteadyMeanMb === null
        ? null
        : SoakStats.defaultThresholds.storeFractionPerHour * slopes.storeSteadyMeanMb
    const storeBounded =
      slopes.storeSteadyMbPerHour === null || storeBound === null ? null : slopes.storeSteadyMbPerHour <= storeBound
    const storeFirst = storeBytes.find((p) => p.t >= startMs)?.value ?? null
    const storeLast = storeBytes.at(-1)?.value ?? null
    // What the workers logged about attempts cut short: timeouts of the model call, leases lost to a stalled process.
    const logged = { timeouts: 0, leasesNotRenewed: 0, leasesRecovered: 0 }
    for (const slot of slots) {
      const text = readFileSync(join(logs, `worker-${slot.index}.log`), "utf8")
      logged.timeouts += text.split("failed: timeout").length - 1
      logged.leasesNotRenewed += text.split("lease could not be renewed in time").length - 1
      for (const match of text.matchAll(/recovered (\d+) expired lease/g)) logged.leasesRecovered += Number(match[1])
    }
    const summary = {
      backend: report.backend,
      minutes: args.minutes,
      workers: args.workers,
      concurrency: args.concurrency,
      restartMinutes: args.restartMinutes,
      retentionMinutes: args.retentionMinutes,
      capacityPerSecond: Number(capacityPerSecond.toFixed(2)),
      ratePerSecond: Number(ratePerSecond.toFixed(2)),
      submitted: submissions.length,
      acknowledged: submissions.filter((s) => s.acknowledgedIds.length > 0).length,
      finished,
      purged: purged.size,
      purgedLogged: purgedCount,
      lost: report.lost,
      stuck: report.stuck,
      doubleGenerations: report.doubleGenerations,
      underCounted: report.underCounted,
      duplicateJobsPerKey: report.duplicateJobsPerKey,
      staleSettlements: report.staleSettlements,
      restarts: report.faults,
      logged,
      samples: queueAge.length,
      judged: isJudged,
      slopesPerHour: {
        workerRssMb: round(slopes.sentinelRssMbPerHour),
        workerHeapMb: round(slopes.sentinelHeapMbPerHour),
        allProcessesRssMb: round(slopes.pooledRssMbPerHour),
        allProcessesHeapMb: round(slopes.pooledHeapMbPerHour),
        eventLoopP99Ms: round(slopes.eventLoopP99MsPerHour),
        oldestQueuedSeconds: round(slopes.queueAgeSecondsPerHour),
        storeMb: round(slopes.storeMbPerHour),
        storeUnderRetentionMb: round(slopes.storeSteadyMbPerHour)
      },
      storeBounded,
      levels: {
        workerRssMeanMb: round(slopes.sentinelRssMeanMb),
        workerHeapMeanMb: round(slopes.sentinelHeapMeanMb),
        eventLoopP99MeanMs: round(slopes.eventLoopP99MeanMs),
        oldestQueuedMaxLastQuarterSeconds: round(slopes.queueAgeMaxLastQuarterSeconds),
        storeFirstMb: round(storeFirst === null ? null : storeFirst / 1e6),
        storeLastMb: round(storeLast === null ? null : storeLast / 1e6),
        storeUnderRetentionMeanMb: round(slopes.storeSteadyMeanMb),
        storeMaxMb: round(storeBytes.length === 0 ? null : Math.max(...storeBytes.map((p) => p.value)) / 1e6),
        storeBytesPerFinishedJob:
          storeFirst === null || storeLast === null || finished === 0
            ? null
            : Math.round((storeLast - storeFirst) / Math.max(1, finished - burst))
      },
      thresholds: SoakStats.defaultThresholds,
      failures: red
    }
    say(
      isJudged
        ? "slopes judged"
        : `slopes reported, not judged (judged window under ${SoakStats.defaultThresholds.minJudgedMinutes} min)`
    )
    say(
      storeBounded === null
        ? "store size: the run is too short for the retention to turn over twice"
        : `store size ${storeBounded ? "bounded" : "NOT bounded"} under the retention: ` +
            `${slopes.storeSteadyMbPerHour!.toFixed(2)} MB/h once it turned over twice ` +
            `(bound ${storeBound!.toFixed(2)} MB/h, mean ${slopes.storeSteadyMeanMb!.toFixed(2)} MB)`
    )
    say(red.length === 0 ? "green" : "RED")
    for (const line of red) say(`  ${line}`)
    if (red.length > 0) say(`worker logs: ${logs}`)
    console.log(args.json ? JSON.stringify(summary) : JSON.stringify(summary, null, 2))
    process.exitCode = red.length === 0 ? 0 : 1
    if (red.length === 0) rmSync(logs, { recursive: true, force: true })
  } finally {
    await runCleanups(cleanups, say)
  }
}

/** Runs each cleanup once, last registered first; a failing one is reported and the rest still run. */
const runCleanups = async (cleanups: Array<() => Promise<void>>, say: (line: string) => void) => {
  while (cleanups.length > 0) {
    const cleanup = cleanups.pop()!
    try {
      await cleanup()
    } catch (error) {
      say(`cleanup: ${(error as Error).message}`)
    }
  }
}

const round = (value: number | null) => (value === null ? null : Number(value.toFixed(3)))

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    console.error((error as Error).stack ?? String(error))
    process.exit(2)
  }
)
