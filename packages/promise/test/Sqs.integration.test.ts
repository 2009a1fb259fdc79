/**
 * The facade with `sqs`: messages on SQS (fauxqs, started here), the job record in the store. A job submitted
 * through the facade is carried by SQS to a worker and ends succeeded, with one model call.
 */
import { randomUUID } from "node:crypto"
import { type FauxqsServer, startFauxqs } from "fauxqs"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobContext, open } from "../src/index.js"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const pgSchema = `promise_sqs_${randomUUID().replaceAll("-", "").slice(0, 10)}`
let server: FauxqsServer

beforeAll(async () => {
  server = await startFauxqs({ port: 0, logger: false, host: "127.0.0.1" })
})

afterAll(async () => {
  await server.stop()
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`)
  await client.end()
})

const sqsFor = (name: string) => ({
  queueUrl: server.createQueue(name).queueUrl,
  client: {
    region: "us-east-1",
    endpoint: `http://127.0.0.1:${server.port}`,
    credentials: { accessKeyId: "test", secretAccessKey: "test" }
  }
})

const stores = [
  { name: "Postgres server", url: databaseUrl, schema: pgSchema },
  { name: "Redis server", url: redisUrl, schema: `promise-sqs-${randomUUID().slice(0, 8)}` },
  { name: "PGlite in memory", url: "pglite:memory", schema: undefined }
]

describe.each(stores)("SQS beside the $name store", ({ schema, url }) => {
  it("carries a submitted job to a worker that runs it once", async () => {
    const name = `promise-${randomUUID().slice(0, 8)}`
    const queue = await open({ url, schema, queue: name, sqs: sqsFor(name), watchIntervalMs: 50 })
    let calls = 0
    try {
      const worker = queue.worker({
        handlers: {
          shout: {
            attempt: { timeoutMs: 2_000 },
            run: async (input: { text: string }, ctx: JobContext) =>
              ctx.call(
                async () => {
                  calls += 1
                  return { loud: input.text.toUpperCase() }
                },
                { estimateCents: 1 }
              )
          }
        }
      })
      await worker.start()

      const { id } = await queue.submit("shout", { text: "hey" })
      const done = await queue.wait(id, { timeoutMs: 30_000 })

      expect(done.state).toBe("succeeded")
      expect(done.result).toEqual({ loud: "HEY" })
      expect(calls).toBe(1)
    } finally {
      await queue.close()
    }
  })
})
