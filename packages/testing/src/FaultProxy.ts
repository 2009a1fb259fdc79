/**
 * A TCP fault proxy for integration tests: sits between a client and a server (Postgres, Redis, ...) and injects the
 * network faults that break job systems in production: latency, a black hole (bytes vanish, connections hang), a
 * hold (bytes wait in the network and arrive late, all at once, even after their sender gave up), and connection
 * resets, either for every connection at once or when a chosen request passes through.
 *
 * It is a live test utility (real sockets, real timers), not part of any Store.
 *
 * @since 0.1.0
 */
import * as net from "node:net"
import { Effect, type Scope } from "effect"

/**
 * A rule applied to client-to-server chunks: when `match` is true for a chunk, the proxy resets that connection,
 * either before the chunk reaches the server (`"before"`: the request never ran) or after forwarding it
 * (`"after"`: the server runs it, the reply is lost). A rule fires `times` times (default once).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResetRule {
  readonly match: (chunk: Buffer) => boolean
  readonly when: "before" | "after"
  readonly times?: number | undefined
}

/**
 * A rule that starts a hold (`FaultProxy.setHold`) when a client-to-server chunk matches: that chunk and everything
 * after it, on every connection and in both directions, waits until the hold is released. `onHold` is told when it
 * fires. A rule fires `times` times (default once); `cancel` disarms it.
 *
 * @since 0.6.0
 * @category models
 */
export interface HoldRule {
  readonly match: (chunk: Buffer) => boolean
  readonly times?: number | undefined
  readonly onHold?: (() => void) | undefined
}

/**
 * A running proxy. Every fault applies to live connections and to new ones until it is turned off; `resetAll`
 * tears down what is open now (the client sees ECONNRESET).
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultProxy {
  readonly port: number
  readonly host: string
  /** Delay added to every chunk in both directions (order is kept). */
  readonly setLatency: (ms: number) => void
  /** While on, bytes in both directions are dropped and new connections are never connected upstream. */
  readonly setBlackhole: (on: boolean) => void
  /**
   * While on, bytes in both directions wait in the proxy (in order, none dropped) and new connections wait to be
   * connected upstream; off delivers everything that waited. What a client sent before it closed its connection
   * during a hold still reaches the server afterwards (then the upstream connection ends), as a delayed packet would.
   */
  readonly setHold: (on: boolean) => void
  /** Whether a hold is on. */
  readonly holding: () => boolean
  /** Adds a hold rule; `fired` says how many times it started a hold, `cancel` disarms it. */
  readonly addHoldRule: (rule: HoldRule) => { readonly fired: () => number; readonly cancel: () => void }
  /** Resets every open connection now. */
  readonly resetAll: () => void
  /** Adds a reset rule; returns how many times it has fired so far (read it later). */
  readonly addResetRule: (rule: ResetRule) => { readonly fired: () => number }
  /** Connections currently open through the proxy. */
  readonly connections: () => number
  /** Connections accepted since the proxy started. */
  readonly accepted: () => number
  /** Rewrites a connection URL's host and port to point at the proxy. */
  readonly url: (target: string) => string
  readonly close: () => Promise<void>
}

/**
 * Where the proxy listens and where it forwards.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultProxyOptions {
  readonly targetHost: string
  readonly targetPort: number
  readonly listenHost?: string | undefined
  /** 0 (default) picks a free port. */
  readonly listenPort?: number | undefined
}

interface Pair {
  readonly client: net.Socket
  upstream: net.Socket | undefined
}

const destroyWithReset = (socket: net.Socket | undefined): void => {
  if (socket === undefined || socket.destroyed) return
  if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy()
  else socket.destroy()
}

/**
 * Starts a proxy. Resolve it, point the client at `port` (or `url(...)`), inject faults, `close()` at the end.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: FaultProxyOptions): Promise<FaultProxy> =>
  new Promise((resolve, reject) => {
    let latencyMs = 0
    let blackhole = false
    let accepted = 0
    // While a hold is on, `released` is the promise every forwarded chunk waits for.
    let hold: { readonly released: Promise<void>; readonly release: () => void } | undefined
    const holdRules: Array<{ rule: HoldRule; fired: number; cancelled: boolean }> = []
    const setHold = (on: boolean) => {
      if (on && hold === undefined) {
        let release = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        hold = { released, release }
      } else if (!on && hold !== undefined) {
        const { release } = hold
        hold = undefined
        release()
      }
    }
    const pairs = new Set<Pair>()
    const rules: Array<{ rule: ResetRule; fired: number }> = []

    /**
     * Forwards in order, after the current latency and once any hold is released, unless the black hole swallows the
     * chunk. `drained` resolves once everything forwarded so far was written.
     */
    const forwarder = (to: () => net.Socket | undefined) => {
      let chain = Promise.resolve()
      let queued = 0
      const forward = (chunk: Buffer) => {
        if (blackhole) return
        const delay = latencyMs
        const held = hold?.released
        queued += 1
        chain = chain
          .then(() => held)
          .then(
            () =>
              new Promise<void>((done) => {
                const send = () => {
                  const socket = to()
                  if (!blackhole && socket !== undefined && !socket.destroyed) socket.write(chunk)
                  queued -= 1
                  done()
                }
                if (delay > 0) setTimeout(send, delay)
                else send()
              })
          )
      }
      return { forward, busy: () => queued > 0 || hold !== undefined, drained: () => chain }
    }

    const teardown = (pair: Pair) => {
      destroyWithReset(pair.client)
      destroyWithReset(pair.upstream)
      pairs.delete(pair)
    }

    const server = net.createServer((client) => {
      accepted++
      const pair: Pair = { client, upstream: undefined }
      pairs.add(pair)
      const pending: Array<{ readonly chunk: Buffer; readonly resetAfter: boolean }> = []
      // Once a rule decided to reset after forwarding, the server's reply must never reach the client.
      let doomed = false
      const forwardThenReset = (socket: net.Socket, chunk: Buffer) => {
        doomed = true
        socket.write(chunk, () => setTimeout(() => teardown(pair), 20))
      }
      const toServer = forwarder(() => pair.upstream)
      const toClient = forwarder(() => (doomed ? undefined : pair.client))
      // A client gone while its bytes still wait (a hold): they reach the server first, then the upstream ends.
      let clientGone = false
      const onClientGone = () => {
        if (clientGone) return
        clientGone = true
        if (pair.upstream === undefined || !toServer.busy()) return teardown(pair)
        void toServer.drained().then(() => {
          pair.upstream?.end()
          pairs.delete(pair)
        })
      }
      client.on("error", onClientGone)
      client.on("close", onClientGone)
      client.on("data", (chunk) => {
        for (const entry of holdRules) {
          if (!entry.cancelled && entry.fired < (entry.rule.times ?? 1) && entry.rule.match(chunk)) {
            entry.fired++
            setHold(true)
            entry.rule.onHold?.()
          }
        }
        for (const entry of rules) {
          const limit = entry.rule.times ?? 1
          if (entry.fired < limit && entry.rule.match(chunk)) {
            entry.fired++
            if (entry.rule.when === "before" || blackhole) return teardown(pair)
            if (pair.upstream === undefined) pending.push({ chunk, resetAfter: true })
            else forwardThenReset(pair.upstream, chunk)
            return
          }
        }
        if (pair.upstream === undefined) pending.push({ chunk, resetAfter: false })
        else toServer.forward(chunk)
      })
      const connectUpstream = () => {
        if (client.destroyed) return
        if (blackhole || hold !== undefined) {
          setTimeout(connectUpstream, 50)
          return
        }
        const upstream = net.connect({ host: options.targetHost, port: options.targetPort })
        upstream.on("connect", () => {
          pair.upstream = upstream
          for (const { chunk, resetAfter } of pending.splice(0)) {
            if (resetAfter) return forwardThenReset(upstream, chunk)
            toServer.forward(chunk)
          }
        })
        upstream.on("data", toClient.forward)
        upstream.on("error", () => teardown(pair))
        upstream.on("close", () => teardown(pair))
      }
      connectUpstream()
    })
    server.on("error", reject)
    server.listen(options.listenPort ?? 0, options.listenHost ?? "127.0.0.1", () => {
      const address = server.address() as net.AddressInfo
      resolve({
        port: address.port,
        host: address.address,
        setLatency: (ms) => {
          latencyMs = Math.max(0, ms)
        },
        setBlackhole: (on) => {
          blackhole = on
        },
        setHold,
        holding: () => hold !== undefined,
        addHoldRule: (rule) => {
          const entry = { rule, fired: 0, cancelled: false }
          holdRules.push(entry)
          return {
            fired: () => entry.fired,
            cancel: () => {
              entry.cancelled = true
            }
          }
        },
        resetAll: () => {
          for (const pair of [...pairs]) teardown(pair)
        },
        addResetRule: (rule) => {
          const entry = { rule, fired: 0 }
          rules.push(entry)
          return { fired: () => entry.fired }
        },
        connections: () => pairs.size,
        accepted: () => accepted,
        url: (target) => {
          const parsed = new URL(target)
          parsed.hostname = address.address
          parsed.port = String(address.port)
          return parsed.toString()
        },
        close: () =>
          new Promise<void>((done) => {
            setHold(false)
            for (const pair of [...pairs]) teardown(pair)
            server.close(() => done())
          })
      })
    })
  })

/**
 * `start` as a scoped Effect: the proxy closes with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: FaultProxyOptions): Effect.Effect<FaultProxy, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => start(options)),
    (proxy) => Effect.promise(() => proxy.close())
  )
