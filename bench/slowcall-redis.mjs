// slowcall on Redis in the peer benchmark harness (shared/bench): one adapter file with the shape documented at the
// top of the harness's adapters/index.mjs, so slowcall's Redis adapter runs side by side with BullMQ in one run:
//
//   node ../shared/bench/run.mjs --quick --reps 1 --peers bullmq,$PWD/bench/slowcall-redis.mjs --workloads w1
//
// Redis: SLOWCALL_BENCH_REDIS_URL, default redis://127.0.0.1:6379/3. Not db 0: the harness's BullMQ adapter runs
// FLUSHDB there. A fresh setup deletes this adapter's own keys (prefix `anchors-slowcall`, SCAN + UNLINK); it never
// flushes a database.
//
// Every call goes through the public API and keeps the whole protocol; nothing is skipped for the benchmark:
// - enqueue:     Client.submit({ queue, type, input }), one call per job, each awaited: validate and hash the input
//                (canonical JSON, sha-256), write the job id's route (HSETNX), then the submit script (EVALSHA: the
//                job record, its input, every index and the write event, in one script on the queue's slot). The
//                transport's publish writes nothing: the queued record is the message.
// - enqueueBulk: Client.submitMany(chunk), one call per chunk: the same per job, as one Store.submit batch (the
//                routes pipelined, one submit script for the chunk).
// - worker:      Worker.make({ queue, concurrency, prefetch, handlers: [Handler.make(...)] }) on RedisStore.layer.
//                RedisTransport's messages are the Store's records (`claimsFromStore`), so per round the worker runs
//                one claimNext script (up to concurrency + prefetch due jobs: fencing tokens bumped, attempt rows
//                appended, leases in store time), the handlers, and one fenced settle script per round trip for every
//                attempt that ended (state, attempt rows ended, results, indexes); it sleeps on the queue's sharded
//                pub/sub channel when nothing is due. The lease it holds is the keep-alive (the harness's `leaseMs`,
//                else the Worker's 6 s default), renewed every third of it, so no live attempt is taken over and a
//                dead worker's is, by the next claimNext; the handler makes no model call, so it writes no charge.
//                PREFETCH (SLOWCALL_BENCH_PREFETCH, default 500) is the one setting changed from the defaults
//                (0 under `npm run bench:compare` for W5-W7, as in bench/slowcall.mjs).
// - pending:     Query.stats({ queue }): queued + running, from the per-state sorted sets (ZCARD).
// The workspace code is imported from a bundle of bench/lib.ts (scripts/bundle.mjs: compiled once, cached by content),
// as a user's build would ship it; the measured process never compiles TypeScript.
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"
import { adapterCalls, infoOf, PREFETCH, QUEUE, settingsOf } from "./common.mjs"

const [effect, lib, ioredis] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href)),
  import("ioredis")
])
const { Context, Effect } = effect
const { RedisStore } = lib

const PREFIX = "anchors-slowcall"
const REDIS_URL = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"

/** Deletes this adapter's keys (never a whole database). */
async function dropKeys() {
  const client = new ioredis.Redis(REDIS_URL)
  try {
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${PREFIX}:*`, "COUNT", 5000)
      cursor = next
      if (keys.length > 0) await client.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    client.disconnect()
  }
}

/** @param {{ url?: string }} [options] */
export default function create(options = {}) {
  const url = options.url || REDIS_URL
  let store
  const settings = settingsOf(options, lib.Lease.defaultKeepAliveMs)
  const calls = adapterCalls({ effect, lib, settings })

  return {
    name: "slowcall-redis",
    package: "@slowcall/core + @slowcall/adapter-redis",
    version: "0.1.0",
    backend: "redis",
    api: {
      enqueue: "client.submit({ queue, type, input })",
      enqueueBulk: "client.submitMany(chunk): one Store.submit batch (routes pipelined, one submit script)",
      worker: `Worker.make({ queue, concurrency, prefetch: ${PREFETCH}, handlers: [Handler.make(...)] }) on RedisStore.layer (claimNext script -> handler -> batched settle script)`,
      workerShort: `Worker.make, prefetch ${PREFETCH} (claimNext -> batched settle)`
    },

    async setup({ fresh }) {
      if (fresh) await dropKeys()
      const context = await calls.open(RedisStore.layer({ url, prefix: PREFIX, checkServer: false }), { fresh })
      store = Context.get(context, RedisStore.RedisStore)
    },

    enqueue: calls.enqueue,
    enqueueBulk: calls.enqueueBulk,
    startWorker: calls.startWorker,

    info: () => infoOf(settings, { redisUrl: url }),

    async pending() {
      const stats = await Effect.runPromise(store.stats({ queue: QUEUE, failedSince: 0 }))
      return stats.byState.queued + stats.byState.running
    },

    stop: calls.stop,

    async teardown() {
      await calls.close()
      store = undefined
    }
  }
}
