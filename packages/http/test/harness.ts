/**
 * Starts the HTTP server on a free port over a given Store/Query/Transport layer, for tests.
 */
import { HttpServer } from "@effect/platform"
import type { PgDriver } from "@slowcall/adapter-postgres/PgDriver"
import type { Limiter } from "@slowcall/core/Limiter"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import * as PgScheduleStore from "@slowcall/schedules/PgScheduleStore"
import type { ScheduleStore } from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Server from "../src/Server.js"

export type Backend = Store | Query | Transport | Limiter | ScheduleStore

/** A Postgres adapter layer (PGlite or a server) with the ScheduleStore on its driver, in the same schema. */
export const withPgSchedules = <E>(
  adapter: Layer.Layer<Exclude<Backend, ScheduleStore> | PgDriver, E>,
  schema: string
): Layer.Layer<Backend, E> => PgScheduleStore.layer({ schema }).pipe(Layer.provideMerge(adapter))

export interface Running {
  readonly url: string
  readonly runtime: ManagedRuntime.ManagedRuntime<Backend | HttpServer.HttpServer, unknown>
  readonly run: <A, E>(effect: Effect.Effect<A, E, Backend>) => Promise<A>
  readonly close: () => Promise<void>
}

export const start = async (
  backend: Layer.Layer<Backend, unknown>,
  options: Partial<Server.Options> = {}
): Promise<Running> => {
  const layer = Server.layerNode({
    jobTypes: ["demo.echo", "test.work"],
    port: 0,
    sseIntervalMs: 50,
    ...options
  }).pipe(Layer.provideMerge(backend))
  const runtime = ManagedRuntime.make(layer)
  const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return {
    url: `http://127.0.0.1:${address.port}`,
    runtime,
    run: (effect) => runtime.runPromise(effect),
    close: () => runtime.dispose()
  }
}
