/**
 * Test support: a fauxqs server (the SQS emulator) started by the test itself on a free port of 127.0.0.1 and
 * stopped with the layer's scope, an SDK client with fake static credentials pointed at it, and queue helpers.
 */
import { SQSClient } from "@aws-sdk/client-sqs"
import type { SqsTransportOptions } from "@slowcall/adapter-sqs/SqsTransport"
import { Context, Effect, Layer } from "effect"
import { type FauxqsServer, startFauxqs } from "fauxqs"
import * as SqsTransport from "../src/SqsTransport.js"

/** The emulator, its endpoint and a client on it. */
export interface Sqs {
  readonly server: FauxqsServer
  readonly endpoint: string
  readonly client: SQSClient
  /** Creates a queue (idempotent) and returns its URL. */
  readonly createQueue: (name: string, attributes?: Record<string, string>) => string
  /** Creates a queue with a dead-letter queue behind it after `maxReceiveCount` receives. */
  readonly createWithDlq: (
    name: string,
    maxReceiveCount: number,
    attributes?: Record<string, string>
  ) => { readonly url: string; readonly dlqUrl: string; readonly dlqName: string }
}

export class SqsServer extends Context.Tag("test/SqsServer")<SqsServer, Sqs>() {}

/** Region and fake static credentials: fauxqs checks neither. */
export const clientConfig = (endpoint: string) => ({
  region: "us-east-1",
  endpoint,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
  maxAttempts: 1
})

export const acquireSqs: Effect.Effect<Sqs, never, import("effect").Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () => {
    const server = await startFauxqs({ port: 0, logger: false, host: "127.0.0.1" })
    const endpoint = `http://127.0.0.1:${server.port}`
    const client = new SQSClient(clientConfig(endpoint))
    const createQueue = (name: string, attributes?: Record<string, string>) =>
      server.createQueue(name, attributes === undefined ? {} : { attributes }).queueUrl
    const createWithDlq = (name: string, maxReceiveCount: number, attributes: Record<string, string> = {}) => {
      const fifo = name.endsWith(".fifo")
      const dlqName = fifo ? `${name.slice(0, -5)}-dlq.fifo` : `${name}-dlq`
      const dlq = server.createQueue(dlqName, fifo ? { attributes: { FifoQueue: "true" } } : {})
      const url = createQueue(name, {
        ...attributes,
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.queueArn, maxReceiveCount })
      })
      return { url, dlqUrl: dlq.queueUrl, dlqName }
    }
    return { server, endpoint, client, createQueue, createWithDlq } satisfies Sqs
  }),
  (sqs) =>
    Effect.promise(async () => {
      sqs.client.destroy()
      await sqs.server.stop()
    })
)

/** The emulator as a layer. */
export const layerSqs: Layer.Layer<SqsServer> = Layer.scoped(SqsServer, acquireSqs)

/** SqsTransport on the emulator, every slowcall queue on an SQS queue of the same name, made on first use. */
export const layerTransport = (
  options: SqsTransportOptions & { readonly attributes?: Record<string, string> | undefined } = {}
) =>
  Layer.unwrapEffect(
    Effect.map(SqsServer, (sqs) =>
      SqsTransport.layerFromClient(sqs.client, {
        queueUrl: (queue) => sqs.createQueue(queue, options.attributes),
        ...options
      })
    )
  )
