/**
 * The suites on a real Redis Cluster: three `redis-server --cluster-enabled yes` masters this file starts on free
 * ports in its own folder (and stops afterwards), joined by `redis-cli --cluster create`, driven through an ioredis
 * `Cluster` client. The Store and Transport conformance suites (the Transport waking on sharded pub/sub) and the
 * model-based properties (sequential, and concurrent from eight Cluster clients) run unchanged; then the cases that only a Cluster has: a job whose queue lives on one node and whose route on another, seen by a submitter and a
 * worker on separate clients, and one batch whose items live on three nodes. Batches (`BatchStore`) run in the
 * conformance suite, the model-based property and the concurrent property here too.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { Message } from "@slowcall/core/Transport"
import { makeJobFactory } from "@slowcall/testing/JobFactory"
import { StoreConcurrentProperty } from "@slowcall/testing/StoreConcurrentProperty"
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Clock, Effect, Layer } from "effect"
import { Cluster } from "ioredis"
import { afterAll, beforeAll, describe } from "vitest"
import * as Keys from "../src/internal/keys.js"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"
import * as RedisTransport from "../src/RedisTransport.js"
import { type LocalCluster, startCluster } from "./servers.js"

let cluster: LocalCluster | undefined

beforeAll(async () => {
  cluster = await startCluster()
}, 60_000)

afterAll(() => {
  cluster?.stop()
})

/** The Store on the Cluster, under its own prefix (the Cluster is thrown away at the end, keys and all). */
const clusterLayer = (prefix: string) =>
  RedisStore.layerFromConnection({ checkServer: false }).pipe(
    Layer.provideMerge(Layer.unwrapEffect(Effect.sync(() => RedisConnection.layer({ nodes: cluster!.nodes, prefix }))))
  )

StoreConformance({
  name: "redis cluster",
  layer: clusterLayer("conf"),
  capabilities: { concurrent: true, sharedState: true, batches: true, cycle: true }
})

// Purges on a Cluster: the script runs in the queue's slot, the purged jobs' routes are deleted on their own nodes.
const purge = Effect.map(RedisStore.RedisStore, (store) => store.purge)

StoreProperty({ name: "redis cluster", layer: clusterLayer("prop"), purge, numRuns: 1000 })

// Batches on a Cluster: each batch's record lives in its queue's slot, its route (like a job's) on another node.
StoreProperty({
  name: "redis cluster, with batches",
  layer: clusterLayer("bprop"),
  batches: true,
  purge,
  numRuns: 1000
})

// Eight clients, each a Cluster client of its own (connections to every node), under the property's one prefix.
StoreConcurrentProperty({
  name: "redis cluster",
  layer: clusterLayer("cprop"),
  clientLayer: clusterLayer("cprop"),
  batches: true
})

const factory = makeJobFactory()

TransportConformance({
  name: "redis cluster",
  layer: RedisTransport.layerFromConnection({ timeSource: "clock" }).pipe(Layer.provideMerge(clusterLayer("tconf"))),
  prepare: ({ message, queue }: { readonly queue: string; readonly message: Message }) =>
    Effect.gen(function* () {
      const store = yield* RedisStore.RedisStore
      const now = yield* Clock.currentTimeMillis
      const item = yield* factory.submitItem({ queue, type: message.type, version: message.version })
      yield* store.submit({ items: [{ ...item, id: message.jobId, priority: message.priority ?? 0 }], now })
    })
})

/** The node (its port) serving a key's slot. */
const nodeOf = async (client: Cluster, key: string): Promise<number> => {
  const slot = (await client.call("CLUSTER", "KEYSLOT", key)) as number
  const slots = (await client.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>
  return slots.find(([from, to]) => slot >= from && slot <= to)![2][1]
}

/** Two separate connections (a submitter's and a worker's) to the Cluster, each with its own route cache. */
const twoClients = Effect.gen(function* () {
  const open = () =>
    Effect.acquireRelease(
      Effect.sync(() => new Cluster([...cluster!.nodes])),
      (client) => Effect.sync(() => client.disconnect())
    )
  const a = yield* open()
  const b = yield* open()
  return {
    probe: a,
    submitter: RedisStore.make({ client: a, prefix: "xnode", cluster: true }, { dataRetentionMs: null }),
    worker: RedisStore.make({ client: b, prefix: "xnode", cluster: true }, { dataRetentionMs: null })
  }
})

const item = (id: JobId, queue: string) => ({
  id,
  queue,
  type: "cluster.echo",
  version: 1,
  inputHash: `h-${id}`,
  input: { id },
  maxAttempts: 3
})

describe("a Redis Cluster", () => {
  it.live("scripts sent in one tick from one client of the adapter all run, their keys on different nodes", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // The adapter's own client (auto-pipelining on). A script's first argument is its sha, not a key: grouped by
        // the sha's slot, scripts whose keys live on other nodes once shared a pipeline the client then refused.
        const { client } = yield* RedisConnection.acquire({ nodes: cluster!.nodes, prefix: "tick" })
        const store = RedisStore.make({ client, prefix: "tick", cluster: true }, { dataRetentionMs: null })
        const keys = Keys.make("tick")
        const byNode = new Map<number, string>()
        for (let i = 0; i < 200 && byNode.size < 3; i++) {
          const queue = `tick-${i}`
          const node = yield* Effect.promise(() => nodeOf(client as Cluster, keys.meta(queue)))
          if (!byNode.has(node)) byNode.set(node, queue)
        }
        const queues = [...byNode.values()]
        const ids = yield* Effect.all(queues.map(() => makeJobId))

        const submitted = yield* Effect.all(
          queues.map((queue, i) => store.submit({ items: [item(ids[i]!, queue)] })),
          { concurrency: "unbounded" }
        )
        const listed = yield* Effect.all(
          queues.map((queue) => store.list({ queue })),
          { concurrency: "unbounded" }
        )

        expect(queues).toHaveLength(3)
        expect(submitted.map((reply) => reply.results[0]!._tag)).toEqual(["Created", "Created", "Created"])
        expect(listed.map((jobs) => jobs.map((job) => job.id))).toEqual(ids.map((id) => [id]))
      })
    )
  )

  it.live(
    "a submitter and a worker on separate clients see one job whose queue and route live on different nodes",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { probe, submitter, worker } = yield* twoClients
          const keys = Keys.make("xnode")
          let found: { readonly queue: string; readonly id: JobId } | undefined
          for (let i = 0; i < 100 && found === undefined; i++) {
            const queue = `apart-${i}`
            const id = yield* makeJobId
            const queueNode = yield* Effect.promise(() => nodeOf(probe, keys.meta(queue)))
            const routeNode = yield* Effect.promise(() => nodeOf(probe, keys.route(id)))
            if (queueNode !== routeNode) found = { queue, id }
          }
          expect(found).toBeDefined()
          const { id, queue } = found!

          const submitted = yield* submitter.submit({ items: [item(id, queue)] })
          const claimed = yield* worker.claim({ items: [{ jobId: id, owner: "worker", leaseMs: 30_000 }] })
          const first = claimed.results[0]!
          const token = first._tag === "Claimed" ? first.job.leaseToken : -1
          const settled = yield* worker.settle({
            items: [{ jobId: id, token, outcome: { _tag: "Complete", result: { ok: true } } }]
          })
          const seen = yield* submitter.get({ jobId: id })

          expect(submitted.results[0]!._tag).toBe("Created")
          expect(claimed.results[0]).toMatchObject({ _tag: "Claimed", job: { id, queue, leaseToken: 1 } })
          expect(settled.results[0]).toMatchObject({ _tag: "Settled", job: { state: "succeeded" } })
          expect(seen).toMatchObject({ id, queue, state: "succeeded", result: { ok: true } })
          expect(yield* submitter.attempts({ jobId: id })).toMatchObject([{ token: 1, outcome: "succeeded" }])
        })
      )
  )

  it.live("one batch whose items live on three nodes: per-item results in item order, at one store time", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { probe, submitter, worker } = yield* twoClients
        const keys = Keys.make("xnode")
        const byNode = new Map<number, string>()
        for (let i = 0; i < 200 && byNode.size < 3; i++) {
          const queue = `spread-${i}`
          const node = yield* Effect.promise(() => nodeOf(probe, keys.meta(queue)))
          if (!byNode.has(node)) byNode.set(node, queue)
        }
        const queues = [...byNode.values()]
        expect(queues).toHaveLength(3)
        const ids = yield* Effect.all([makeJobId, makeJobId, makeJobId, makeJobId])
        // Items interleave the queues: the first and the last share one.
        const items = ids.map((id, i) => item(id, queues[i % 3]!))

        const submitted = yield* submitter.submit({ items })
        const unknown = yield* makeJobId
        const claimed = yield* worker.claim({
          items: [...ids.slice(0, 2), unknown, ...ids.slice(2)].map((jobId) => ({
            jobId,
            owner: "worker",
            leaseMs: 30_000
          }))
        })
        const jobs = yield* worker.list({ queue: queues[0], order: "oldest" })

        expect(submitted.results.map((r) => r._tag)).toEqual(["Created", "Created", "Created", "Created"])
        expect(claimed.results.map((r) => r._tag)).toEqual(["Claimed", "Claimed", "NotFound", "Claimed", "Claimed"])
        for (const result of claimed.results) {
          if (result._tag === "Claimed") expect(result.job.updatedAt).toBe(claimed.now)
        }
        expect(claimed.results.filter((r) => r._tag === "Claimed").map((r) => r.job.id)).toEqual(ids)
        expect(jobs.map((j) => [j.id, j.state])).toEqual([
          [ids[0], "running"],
          [ids[3], "running"]
        ])
      })
    )
  )
})
