import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FaultProxy from "../src/FaultProxy.js"

let echo: net.Server
let echoPort: number
const received: Array<string> = []

beforeAll(async () => {
  echo = net.createServer((socket) => {
    socket.on("error", () => {})
    socket.on("data", (chunk) => {
      received.push(chunk.toString())
      socket.write(chunk)
    })
  })
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve))
  echoPort = (echo.address() as net.AddressInfo).port
})

afterAll(async () => {
  await new Promise<void>((resolve) => echo.close(() => resolve()))
})

const connect = async (port: number) => {
  const socket = net.connect({ host: "127.0.0.1", port })
  const events: Array<string> = []
  const data: Array<string> = []
  socket.on("data", (chunk) => data.push(chunk.toString()))
  socket.on("error", (error: NodeJS.ErrnoException) => events.push(error.code ?? "error"))
  socket.on("close", () => events.push("close"))
  await new Promise<void>((resolve) => socket.on("connect", () => resolve()))
  return { socket, events, data }
}

const waitFor = async (check: () => boolean, ms = 2_000) => {
  const start = Date.now()
  while (!check() && Date.now() - start < ms) await new Promise((resolve) => setTimeout(resolve, 10))
  return check()
}

describe("FaultProxy", () => {
  it("forwards both ways, then adds latency when asked", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    const client = await connect(proxy.port)
    client.socket.write("ping")
    expect(await waitFor(() => client.data.join("") === "ping")).toBe(true)
    proxy.setLatency(150)
    const start = Date.now()
    client.socket.write("slow")
    expect(await waitFor(() => client.data.join("") === "pingslow")).toBe(true)
    expect(Date.now() - start).toBeGreaterThanOrEqual(290)
    client.socket.destroy()
    await proxy.close()
  })

  it("a black hole swallows bytes and keeps new connections from reaching the server", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    const client = await connect(proxy.port)
    proxy.setBlackhole(true)
    client.socket.write("lost")
    expect(await waitFor(() => client.data.length > 0, 300)).toBe(false)
    expect(received).not.toContain("lost")
    proxy.setBlackhole(false)
    client.socket.write("back")
    expect(await waitFor(() => client.data.join("") === "back")).toBe(true)
    client.socket.destroy()
    await proxy.close()
  })

  it("resetAll tears down open connections with a reset", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    const client = await connect(proxy.port)
    client.socket.write("x")
    await waitFor(() => client.data.length > 0)
    expect(proxy.connections()).toBe(1)
    proxy.resetAll()
    expect(await waitFor(() => client.events.includes("close"))).toBe(true)
    expect(client.events).toContain("ECONNRESET")
    expect(proxy.connections()).toBe(0)
    await proxy.close()
  })

  it("a rule resets before or after the matching request reaches the server", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    const before = proxy.addResetRule({ match: (chunk) => chunk.includes("drop-me"), when: "before" })
    const after = proxy.addResetRule({ match: (chunk) => chunk.includes("run-me"), when: "after" })
    const first = await connect(proxy.port)
    first.socket.write("drop-me")
    expect(await waitFor(() => first.events.includes("close"))).toBe(true)
    expect(received).not.toContain("drop-me")
    const second = await connect(proxy.port)
    second.socket.write("run-me")
    expect(await waitFor(() => second.events.includes("close"))).toBe(true)
    expect(await waitFor(() => received.includes("run-me"))).toBe(true)
    expect(second.data).toEqual([])
    expect([before.fired(), after.fired()]).toEqual([1, 1])
    // A rule fires its number of times only: the next match passes through.
    const third = await connect(proxy.port)
    third.socket.write("drop-me again")
    expect(await waitFor(() => third.data.join("") === "drop-me again")).toBe(true)
    third.socket.destroy()
    expect(proxy.accepted()).toBe(3)
    await proxy.close()
  })

  it("a hold delivers the bytes it kept, in order, once released, even after the client left", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    const client = await connect(proxy.port)
    proxy.setHold(true)
    expect(proxy.holding()).toBe(true)
    client.socket.write("held-1")
    await new Promise((resolve) => setTimeout(resolve, 50))
    client.socket.write("held-2")
    expect(await waitFor(() => received.some((r) => r.includes("held-")), 300)).toBe(false)
    // The sender gives up and closes; what it sent is still on its way.
    client.socket.destroy()
    await waitFor(() => client.events.includes("close"))
    proxy.setHold(false)
    expect(await waitFor(() => received.join("").includes("held-1held-2"))).toBe(true)
    expect(client.data).toEqual([])
    await proxy.close()
  })

  it("a hold rule starts the hold at the matching request, which waits with everything after it", async () => {
    const proxy = await FaultProxy.start({ targetHost: "127.0.0.1", targetPort: echoPort })
    let held = 0
    const rule = proxy.addHoldRule({ match: (chunk) => chunk.includes("outcome"), onHold: () => held++ })
    const first = await connect(proxy.port)
    const second = await connect(proxy.port)
    first.socket.write("before")
    expect(await waitFor(() => first.data.join("") === "before")).toBe(true)
    first.socket.write("outcome-1")
    expect(await waitFor(() => held === 1)).toBe(true)
    second.socket.write("other")
    expect(await waitFor(() => received.includes("outcome-1") || received.includes("other"), 300)).toBe(false)
    expect([proxy.holding(), rule.fired()]).toEqual([true, 1])
    proxy.setHold(false)
    expect(await waitFor(() => first.data.join("") === "beforeoutcome-1" && second.data.join("") === "other")).toBe(
      true
    )
    // Fired its one time: the next match passes; a cancelled rule never fires.
    const cancelled = proxy.addHoldRule({ match: (chunk) => chunk.includes("outcome") })
    cancelled.cancel()
    first.socket.write("outcome-2")
    expect(await waitFor(() => first.data.join("").endsWith("outcome-2"))).toBe(true)
    expect([proxy.holding(), rule.fired(), cancelled.fired()]).toEqual([false, 1, 0])
    first.socket.destroy()
    second.socket.destroy()
    await proxy.close()
  })
})
