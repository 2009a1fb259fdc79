/**
 * Acceptance: three worker processes on the machine's Postgres (then Redis), each running the Scheduler beside its
 * worker, one of them SIGKILLed and replaced mid-run, two schedules every second for about 45 s; then an outage of
 * the whole fleet (every process SIGKILLed) for 10 s, and a fresh fleet. Every tick gets exactly one job across the
 * fleet and the restarts; the ten ticks of the outage give ten jobs under `all` and one (the newest) under `latest`;
 * the jobs run through the ordinary claim path (they end `succeeded`).
 */
import { type ChildProcess, fork } from "node:child_process"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import { Query } from "@slowcall/core/Query"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as PgScheduleStore from "../src/PgScheduleStore.js"
import * as RedisScheduleStore from "../src/RedisScheduleStore.js"
import type { TickInput } from "../src/Schedule.js"
import { ScheduleStore } from "../src/ScheduleStore.js"
import { DATABASE_URL, dropPrefix, dropSchema, REDIS_URL, uniqueName } from "./support.js"

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const script = new URL("./fleet/process.ts", import.meta.url).pathname

const SECOND = 1000
const NORMAL_RUN_MS = 45 * SECOND
const OUTAGE_TICKS = 10

interface Member {
  readonly child: ChildProcess
  readonly ready: Promise<void>
  readonly exited: Promise<void>
  readonly output: () => string
  /** The store time of each Scheduler pass the process reported. */
  readonly passes: Array<number>
}

const members = new Set<Member>()

const spawnMember = (env: Record<string, string>): Member => {
  const child = fork(script, [], {
    execArgv: ["--import", tsx],
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe", "ipc"]
  })
  let output = ""
  const passes: Array<number> = []
  child.on("message", (message) => {
    const pass = (message as { pass?: number }).pass
    if (pass !== undefined) passes.push(pass)
  })
  child.stdout!.on("data", (chunk) => {
    output += chunk
  })
  child.stderr!.on("data", (chunk) => {
    output += chunk
  })
  const ready = new Promise<void>((resolve, reject) => {
    child.on("message", (message) => {
      if ((message as { ready?: boolean }).ready) resolve()
    })
    child.once("exit", (code, signal) => reject(new Error(`fleet process exited (${code ?? signal}): ${output}`)))
  })
  ready.catch(() => {})
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const member = { child, ready, exited, output: () => output, passes }
  members.add(member)
  return member
}

const kill = async (member: Member) => {
  member.child.kill("SIGKILL")
  await member.exited
  members.delete(member)
}

const start = (member: Member) => member.child.send({ cmd: "start" })

afterEach(async () => {
  await Promise.all([...members].map(kill))
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Backend {
  readonly name: string
  readonly env: Record<string, string>
  readonly layer: Layer.Layer<ScheduleStore | Query, unknown>
  readonly drop: () => Promise<void>
}

const postgres = (): Backend => {
  const schema = uniqueName("schedfleet")
  return {
    name: "Postgres",
    env: { SCHEMA: schema, DATABASE_URL },
    layer: PgScheduleStore.layer({ schema }).pipe(
      Layer.provideMerge(PgStore.layer({ connectionString: DATABASE_URL, schema }))
    ),
    drop: () => dropSchema(schema)
  }
}

const redis = (): Backend => {
  const prefix = `sctest:${uniqueName("schedfleet")}`
  return {
    name: "Redis",
    env: { PREFIX: prefix, REDIS_URL },
    layer: RedisScheduleStore.layer.pipe(Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix }))),
    drop: () => dropPrefix(prefix)
  }
}

const scenario = async (backend: Backend) => {
  const runtime = ManagedRuntime.make(backend.layer)
  try {
    const read = () =>
      runtime.runPromise(
        Effect.gen(function* () {
          const { now, result } = yield* (yield* ScheduleStore).list()
          const cursors = new Map(result.map((record) => [record.schedule.id, record.cursor]))
          return { now, cursors, created: new Map(result.map((record) => [record.schedule.id, record.createdAt])) }
        })
      )
    const jobs = () => runtime.runPromise(Effect.flatMap(Query, (query) => query.list({ queue: "ticks", limit: null })))
    await read() // builds the layer: the schema is migrated before the fleet starts

    // Three processes, each with a worker and a Scheduler.
    const fleet = [0, 1, 2].map(() => spawnMember(backend.env))
    await Promise.all(fleet.map((member) => member.ready))
    fleet.forEach(start)
    const began = Date.now()

    // One process SIGKILLed and replaced a third of the way in.
    await sleep(NORMAL_RUN_MS / 3)
    await kill(fleet[1]!)
    const replacement = spawnMember(backend.env)
    await replacement.ready
    start(replacement)
    fleet[1] = replacement
    await sleep(Math.max(0, NORMAL_RUN_MS - (Date.now() - began)))

    // A fresh fleet boots now (a process takes seconds to start on a busy machine) and waits, running nothing.
    const fresh = [0, 1, 2].map(() => spawnMember(backend.env))
    await Promise.all(fresh.map((member) => member.ready))
    // The outage: once both schedules have decided the same newest tick, early in its second, the whole fleet dies.
    let last = 0
    for (let i = 0; i < 200; i++) {
      const { now, cursors } = await read()
      const [a, b] = [cursors.get("every-second-all")!, cursors.get("every-second-latest")!]
      if (a === b && now - a < 400) {
        last = a
        break
      }
      await sleep(50)
    }
    expect(last, "the schedules' cursors met on one tick").toBeGreaterThan(0)
    await Promise.all(fleet.map(kill))
    const after = await read()
    expect(after.now - last).toBeLessThan(SECOND) // nothing came between the meeting and the kill
    expect([...after.cursors.values()]).toEqual([last, last])
    // The fresh fleet, booted beforehand and idle (no worker, no Scheduler), starts just after the tenth missed tick.
    const restartAt = last + OUTAGE_TICKS * SECOND + 20
    for (let now = (await read()).now; now < restartAt; now = (await read()).now) {
      await sleep(Math.min(200, restartAt - now))
    }
    fresh.forEach(start)
    await sleep(6 * SECOND)
    // The store time of the fleet's first look after the outage: the newest tick at or before it is the last missed.
    const firstLook = Math.min(...fresh.map((member) => member.passes[0] ?? Number.POSITIVE_INFINITY))
    const newestMissed = Math.floor(firstLook / SECOND) * SECOND
    console.log(`${backend.name}: the fleet looked again ${firstLook - last} ms after the last tick before the outage`)
    await Promise.all(fresh.map(kill))
    // The outage lasted ten ticks: the fleet was back before the eleventh.
    expect(newestMissed - last, "ticks missed in the outage").toBe(OUTAGE_TICKS * SECOND)
    const end = await read()
    await sleep(1500) // the last jobs' settlements are in flight no more: every process is dead
    const all = await jobs()

    const ticks = new Map<string, Map<number, number>>()
    for (const job of all) {
      const input = job.input as unknown as TickInput
      const bySchedule = ticks.get(input.schedule) ?? new Map<number, number>()
      bySchedule.set(input.at, (bySchedule.get(input.at) ?? 0) + 1)
      ticks.set(input.schedule, bySchedule)
    }
    const seconds = (from: number, to: number) =>
      Array.from({ length: Math.max(0, (to - from) / SECOND + 1) }, (_, i) => from + i * SECOND)

    for (const id of ["every-second-all", "every-second-latest"]) {
      const made = ticks.get(id)!
      // Exactly one job per tick: no tick has two.
      expect(
        [...made.values()].filter((n) => n !== 1),
        `${id}: ticks with more than one job`
      ).toEqual([])
      const sorted = [...made.keys()].sort((a, b) => a - b)
      const first = sorted[0]!
      const newest = end.cursors.get(id)!
      expect(first).toBeGreaterThan(after.created.get(id)!)
      expect(first - after.created.get(id)!).toBeLessThanOrEqual(SECOND)
      // Before the outage, through the mid-run restart: every tick once.
      expect(sorted.filter((tick) => tick <= last)).toEqual(seconds(first, last))
      // The outage: the ticks after the last one decided before it, up to the newest at the fleet's first look.
      const outage = sorted.filter((tick) => tick > last && tick <= newestMissed)
      if (id === "every-second-all") {
        expect(outage, "all: a job for each of the ten missed ticks").toEqual(seconds(last + SECOND, newestMissed))
      } else {
        expect(outage, "latest: one job, for the newest missed tick").toEqual([newestMissed])
      }
      // After the outage: every tick once again, up to the newest decided. A process killed between a tick's submit
      // and its cursor's move (the order that never loses a tick) leaves that one tick's job past the cursor.
      const since = sorted.filter((tick) => tick > newestMissed)
      const top = since.at(-1)!
      expect(top - newest, `${id}: jobs past the cursor`).toBeLessThanOrEqual(SECOND)
      expect(since).toEqual(seconds(newestMissed + SECOND, Math.max(top, newest)))
    }
    // The ticks' jobs went through the claim path: all but the newest few ran to success.
    const settled = all.filter((job) => (job.input as unknown as TickInput).at < end.now - 3 * SECOND)
    expect(settled.length).toBeGreaterThan(80)
    expect(settled.filter((job) => job.state !== "succeeded").map((job) => [job.state, job.attempts])).toEqual([])
  } finally {
    await runtime.dispose()
    await backend.drop()
  }
}

describe("schedules across a fleet of processes", () => {
  it("Postgres: one job per tick through a restart; after an outage, all makes ten and latest one", async () => {
    await scenario(postgres())
  }, 240_000)

  it("Redis: one job per tick through a restart; after an outage, all makes ten and latest one", async () => {
    await scenario(redis())
  }, 240_000)
})
