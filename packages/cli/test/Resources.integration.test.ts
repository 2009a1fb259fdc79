/**
 * `slowcall resources` as a user runs it (`packages/cli/bin/slowcall.mjs`) against a live server on the memory store:
 * set, list, get, pause and resume, with `--json` printing the API's body unchanged, an id with `:` and `/`, a cap
 * the fleet learned from a 429 beside the declared one, and every refusal one line with nothing written.
 */
import { execFile } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer } from "effect"
import { type Running, start } from "../../http/test/harness.js"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname

const slowcall = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, NO_COLOR: "1" }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      }
    )
  })

const recorded = Effect.flatMap(Limiter.Limiter, (limiter) => limiter.read({})).pipe(
  Effect.map((read) => read.resources.map((state) => state.resource))
)

describe("slowcall resources against a running server", () => {
  let server: Running
  const resource = "openai:gpt-4.1:org/key-a"

  beforeAll(async () => {
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "cli-resources"
      }
    )
  })
  afterAll(() => server?.close())

  it("set, then list and get show the limits, the buckets and what is in use; --json is the API's body", async () => {
    const set = await slowcall([
      "resources",
      "set",
      resource,
      "--max-concurrent",
      "4",
      "--requests-per-minute",
      "600",
      "--output-tokens-per-minute",
      "90000",
      "--priority-share",
      "1:0.25",
      "--url",
      server.url
    ])
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout).toMatch(/^resource {5}openai:gpt-4\.1:org\/key-a$/m)
    expect(set.stdout).toMatch(
      /^limits {7}max 4 at once, 600 requests\/min, 90,000 output tokens\/min, 25% kept for priority >= 1$/m
    )
    expect(set.stdout).toMatch(/^requests {5}10\/10 \(600\/min\)$/m)
    expect(set.stdout).toMatch(/^input tok {4}-$/m)

    // A worker holds a permit: the listing counts it against the cap.
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        limiter.apply({
          items: [
            {
              _tag: "Acquire",
              resource,
              callId: "call-1",
              holder: { jobId: "job-1", token: 1 },
              leaseMs: 60_000,
              tenant: "acme",
              priority: 2
            }
          ]
        })
      )
    )
    const list = await slowcall(["resources", "list", "--url", server.url])
    expect(list.code, list.stderr).toBe(0)
    const [header, row] = list.stdout.trimEnd().split("\n")
    expect(header).toMatch(
      /^RESOURCE\s+PERMITS\s+LEARNED\s+REQUESTS\s+INPUT TOKENS\s+OUTPUT TOKENS\s+PAUSE\s+429S\s+WAITS$/
    )
    expect(row).toMatch(
      /^openai:gpt-4\.1:org\/key-a\s+1\/4\s+-\s+\S+\/10 \(600\/min\)\s+-\s+\S+\/1,500 \(90,000\/min\)\s+-\s+0\s+0$/
    )

    const get = await slowcall(["resources", "get", resource, "--url", server.url])
    expect(get.code, get.stderr).toBe(0)
    expect(get.stdout).toMatch(/^permits {6}1\/4 in use$/m)
    expect(get.stdout).toMatch(/^learned cap {2}-$/m)
    expect(get.stdout).toMatch(/^CALL\s+JOB\s+TENANT\s+PRIORITY\s+UNTIL\s+PROBE$/m)
    expect(get.stdout).toMatch(/^call-1\s+job-1\s+acme\s+2\s+\S+Z$/m)

    const json = await slowcall(["resources", "get", resource, "--json", "--url", server.url])
    const api = (await (await fetch(`${server.url}/v1/resources/${encodeURIComponent(resource)}`)).json()) as any
    const printed = JSON.parse(json.stdout)
    expect(Object.keys(printed).sort()).toEqual(["now", "resource"])
    expect({ ...printed.resource, buckets: null }).toEqual({ ...api.resource, buckets: null })
    const listed = JSON.parse((await slowcall(["resources", "list", "--json", "--url", server.url])).stdout)
    expect(listed.resources.map((r: any) => r.resource)).toEqual([resource])
    expect(listed.resources[0].learnedConcurrent).toBeNull()
  })

  it("a cap learned from a 429 shows beside the declared one in list and get, and in --json", async () => {
    // Two more calls start beside job-1's; the provider refuses the third with a 429: it takes two at once.
    const holders = ["job-2", "job-3"].map((jobId) => ({ jobId, token: 1 }))
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        Effect.zipRight(
          limiter.apply({
            items: holders.map((holder) => ({
              _tag: "Acquire" as const,
              resource,
              callId: `call-${holder.jobId}`,
              holder,
              leaseMs: 60_000
            }))
          }),
          limiter.apply({
            items: [
              {
                _tag: "Release",
                resource,
                callId: "call-job-3",
                holder: holders[1]!,
                reached: true,
                rateLimited: true
              }
            ]
          })
        )
      )
    )

    const list = await slowcall(["resources", "list", "--url", server.url])
    const get = await slowcall(["resources", "get", resource, "--url", server.url])
    const json = JSON.parse((await slowcall(["resources", "list", "--json", "--url", server.url])).stdout)

    expect(list.code, list.stderr).toBe(0)
    expect(list.stdout.trimEnd().split("\n")[1]).toMatch(/^openai:gpt-4\.1:org\/key-a\s+2\/4\s+2\s+\S+\/10 /)
    expect(get.code, get.stderr).toBe(0)
    expect(get.stdout).toMatch(/^permits {6}2\/4 in use$/m)
    expect(get.stdout).toMatch(/^learned cap {2}2 at once, learned from 429s \(in force\)$/m)
    expect(json.resources[0]).toMatchObject({ resource, maxConcurrent: 4, learnedConcurrent: 2, permitsInUse: 2 })
  })

  it("pause for a while or until resumed, then resume; resuming twice says nothing changed", async () => {
    const timed = await slowcall([
      "resources",
      "pause",
      resource,
      "--for",
      "15m",
      "--reason",
      "provider incident",
      "--url",
      server.url
    ])
    expect(timed.code, timed.stderr).toBe(0)
    expect(timed.stdout).toMatch(/^paused openai:gpt-4\.1:org\/key-a: no worker starts a call on it until \S+Z$/m)
    expect(timed.stdout).toMatch(/^pause {8}manual until \S+Z$/m)
    expect(timed.stdout).toMatch(/^ {2}reason {5}provider incident$/m)
    const until = Date.parse(/until (\S+Z)$/m.exec(timed.stdout)![1]!)
    expect(until - Date.now()).toBeGreaterThan(14 * 60_000)
    expect(until - Date.now()).toBeLessThan(16 * 60_000)

    const open = await slowcall(["resources", "pause", resource, "--json", "--url", server.url])
    expect(JSON.parse(open.stdout).resource.pause).toMatchObject({ kind: "manual", until: null })

    const resumed = await slowcall(["resources", "resume", resource, "--url", server.url])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stdout).toMatch(/^resumed openai:gpt-4\.1:org\/key-a$/m)
    expect(resumed.stdout).toMatch(/^pause {8}-$/m)
    expect(resumed.stdout).toMatch(/^pauses {7}0 rate limited, 0 spend cap, 2 manual$/m)
    const again = await slowcall(["resources", "resume", resource, "--json", "--url", server.url])
    expect(JSON.parse(again.stdout).wasPaused).toBe(false)
  })

  it("refuses with one line and writes nothing: no limit given, a bad share or duration, an id the API refuses", async () => {
    const other = "anthropic:haiku:key-b"
    const cases: ReadonlyArray<[ReadonlyArray<string>, RegExp]> = [
      [["resources", "set", other], /^slowcall: give the limits to set \(--max-concurrent, .*or --unlimited/],
      [
        ["resources", "set", other, "--unlimited", "--max-concurrent", "2"],
        /^slowcall: --unlimited removes every limit/
      ],
      [
        ["resources", "set", other, "--priority-share", "half"],
        /^slowcall: --priority-share half: give MIN-PRIORITY:SHARE/
      ],
      [
        ["resources", "set", other, "--max-concurrent", "0"],
        /^slowcall: PUT \/v1\/resources\/.*failed: invalid_request: maxConcurrent /
      ],
      [["resources", "pause", other, "--for", "soon"], /^slowcall: --for soon: give a duration/],
      [
        ["resources", "pause", other, "--for", "1m", "--until", "2030-01-01T00:00:00Z"],
        /^slowcall: give --until or --for, not both$/
      ],
      [["resources", "pause", other, "--until", "2020-01-01T00:00:00Z"], /failed: until_not_in_future$/],
      [["resources", "get", "has space"], /failed: invalid_request: resource a resource id is/]
    ]
    for (const [args, message] of cases) {
      const result = await slowcall([...args, "--url", server.url])
      expect(result.code, args.join(" ")).toBe(1)
      expect(result.stderr.trim(), args.join(" ")).toMatch(message)
    }
    expect(await server.run(recorded)).toEqual([resource])

    const cleared = await slowcall(["resources", "set", resource, "--unlimited", "--json", "--url", server.url])
    expect(JSON.parse(cleared.stdout).resource.limits).toEqual({})
  })
})
