// Loaded with `node --import` into each `serve` process the soak starts (never into a user's): every
// SLOWCALL_SOAK_SAMPLE_MS it sends the process's resident set, V8 heap and event-loop delay since the last sample
// to the soak over the IPC channel. The channel and the timer are unreferenced, so they never keep the process up.
import { monitorEventLoopDelay } from "node:perf_hooks"

if (typeof process.send === "function") {
  const everyMs = Number(process.env.SLOWCALL_SOAK_SAMPLE_MS ?? 10_000)
  const delay = monitorEventLoopDelay({ resolution: 10 })
  delay.enable()
  const timer = setInterval(() => {
    const memory = process.memoryUsage()
    const sample = {
      kind: "sample",
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      heapTotal: memory.heapTotal,
      external: memory.external,
      eventLoopP50Ms: delay.percentile(50) / 1e6,
      eventLoopP99Ms: delay.percentile(99) / 1e6,
      eventLoopMaxMs: delay.max / 1e6
    }
    delay.reset()
    process.send?.(sample, undefined, {}, () => {
      // The soak is gone or the channel closed: the sample is dropped.
    })
  }, everyMs)
  timer.unref()
  process.channel?.unref()
}
