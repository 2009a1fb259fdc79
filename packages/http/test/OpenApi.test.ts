/**
 * The OpenAPI document as a stock client uses it: `openapi-typescript` (its command, with its own validation of the
 * document) generates types from the live `/openapi.json`, TypeScript compiles a small `openapi-fetch` program
 * against them with no cast (list with `limit: 200`, a typed submit body, the idempotency key as a header), and the
 * program then runs against the same server. The other tests read the document as data: its `info`, a summary and a
 * description per operation, no schema titles nor blank enum members, integers typed as integers, the bearer scheme
 * on the authenticated operations, and only the API's own error bodies.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Handler from "@slowcall/core/Handler"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer, Option, Schema } from "effect"
import ts from "typescript"
import { packageVersion } from "../src/internal/openApi.js"
import { type Running, start } from "./harness.js"

const run = promisify(execFile)
const root = fileURLToPath(new URL("../../../", import.meta.url))
const backend = () =>
  Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
const token = "Bearer doc-test"
const authenticate = (header: string | undefined) =>
  Effect.succeed(header === token ? Option.some("acme") : Option.none())

type Json = Record<string, any>
const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
const operations = (document: Json): Array<[string, string, Json]> =>
  Object.entries(document.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json)
      .filter(([method]) => methods.includes(method))
      .map(([method, operation]): [string, string, Json] => [method, path, operation])
  )

/** Every object in a JSON value, with the key it sits under. */
const objects = (value: unknown, key = "", out: Array<[string, Json]> = []): Array<[string, Json]> => {
  if (Array.isArray(value)) for (const item of value) objects(item, key, out)
  else if (typeof value === "object" && value !== null) {
    out.push([key, value as Json])
    for (const [inner, child] of Object.entries(value)) objects(child, inner, out)
  }
  return out
}

/** The program a user would write with the generated types: no cast, no `any`. */
const program = `
import createClient from "openapi-fetch"
import type { paths } from "./api.js"

const client = createClient<paths>({
  baseUrl: process.env.SERVER_URL!,
  headers: { authorization: process.env.TOKEN! }
})

const submitted = await client.POST("/v1/jobs", {
  params: { header: { "Idempotency-Key": "order-42" } },
  body: { type: "demo.echo", input: { text: "hi" }, maxAttempts: 2, priority: 1, delayMs: 0 }
})
const again = await client.POST("/v1/jobs", {
  params: { header: { "Idempotency-Key": "order-42" } },
  body: { type: "demo.echo", input: { text: "hi" }, maxAttempts: 2, priority: 1, delayMs: 0 }
})
const page = await client.GET("/v1/jobs", { params: { query: { limit: 200, state: "queued", requestKey: "order-42" } } })
const refused = await client.GET("/v1/jobs", { params: { query: { limit: 5000 } } })
const stats = await client.GET("/v1/stats", { params: { query: { spendWindowMinutes: 60 } } })
const id: string | undefined = submitted.data?.id
const job = id === undefined ? undefined : await client.GET("/v1/jobs/{id}", { params: { path: { id } } })
const failure = refused.error
const issues: ReadonlyArray<{ readonly path: ReadonlyArray<string | number>; readonly message: string }> =
  failure?.error === "invalid_request" ? failure.issues : []
const queued: number | undefined = stats.data?.byState["queued"]
const resource = "openai:gpt-4.1:org/key-a"
const limited = await client.PUT("/v1/resources/{resource}/limits", {
  params: { path: { resource } },
  body: { maxConcurrent: 2, requestsPerMinute: 600, priorityShare: { minPriority: 1, share: 0.25 } }
})
const paused = await client.POST("/v1/resources/{resource}/pause", {
  params: { path: { resource } },
  body: { reason: "spend cap" }
})
const resources = await client.GET("/v1/resources")
const capacity: number | undefined = limited.data?.resource.buckets.requests?.capacity
const batch = await client.POST("/v1/batches", {
  params: { header: { "Idempotency-Key": "import-7" } },
  body: { items: [{ type: "demo.echo", input: { text: "a" } }, { type: "demo.echo", input: { text: "b" } }], budgetCents: 100 }
})
const batchId: string | undefined = batch.data?.id
const followed =
  batchId === undefined ? undefined : await client.GET("/v1/batches/{id}", { params: { path: { id: batchId } } })
const batchItems =
  batchId === undefined
    ? undefined
    : await client.GET("/v1/batches/{id}/jobs", { params: { path: { id: batchId }, query: { state: "queued", limit: 10 } } })
const defined = await client.PUT("/v1/schedules/{id}", {
  params: { path: { id: "nightly/summary" } },
  body: { cron: "0 2 * * *", timezone: "Europe/Berlin", catchUp: "latest", job: { queue: "default", type: "report.summary" } }
})
// A write with no body still says it is JSON, as every state-changing request must.
const json = { "content-type": "application/json" }
const schedulePaused = await client.POST("/v1/schedules/{id}/pause", {
  params: { path: { id: "nightly/summary" } },
  headers: json
})
const badCron = await client.PUT("/v1/schedules/{id}", {
  params: { path: { id: "other" } },
  body: { cron: "61 * * * *", job: { queue: "default", type: "t" } }
})
const schedules = await client.GET("/v1/schedules")
const removed = await client.DELETE("/v1/schedules/{id}", { params: { path: { id: "nightly/summary" } }, headers: json })
const nextTick: string | null | undefined = defined.data?.schedule.nextTick

console.log(JSON.stringify({
  submitted: submitted.response.status,
  again: again.response.status,
  sameJob: again.data?.id === id,
  listed: page.data?.jobs.map((listedJob) => listedJob.id),
  refused: [refused.response.status, refused.error?.error, issues.map((issue) => issue.path.join("."))],
  state: job?.data?.state,
  queued,
  limited: [limited.response.status, limited.data?.resource.resource, capacity],
  pause: paused.data?.resource.pause?.kind,
  resources: resources.data?.resources.map((listed) => [listed.resource, listed.permitsInUse]),
  batch: [batch.response.status, followed?.data?.counts.queued, followed?.data?.budgetCents, batchItems?.data?.jobs.length],
  defined: [defined.response.status, defined.data?.schedule.id, typeof nextTick],
  schedulePaused: [schedulePaused.response.status, schedulePaused.data?.schedule.paused],
  badCron: [badCron.response.status, badCron.error?.error],
  schedules: schedules.data?.schedules.map((listed) => [listed.id, listed.paused]),
  removed: removed.response.status
}))
`

describe("a client generated from /openapi.json", () => {
  let server: Running
  let dir = ""

  beforeAll(async () => {
    server = await start(backend(), { authenticate, operators: ["acme"] })
    dir = mkdtempSync(join(tmpdir(), "slowcall-openapi-"))
    symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir")
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
    writeFileSync(join(dir, "client.ts"), program)
    // openapi-typescript lints the document with Redocly's rules before it generates: the recommended set, not
    // only its default minimal one.
    writeFileSync(join(dir, "redocly.yaml"), "extends:\n  - recommended\n")
  })
  afterAll(async () => {
    await server?.close()
    if (dir !== "") rmSync(dir, { recursive: true, force: true })
  })

  it("is generated by openapi-typescript, compiles without casts, and runs against the server", async () => {
    // Arrange: the types, generated by the tool's own command from the live document (it validates the document
    // first and exits non-zero on an error).
    const cli = join(root, "node_modules/openapi-typescript/bin/cli.js")
    const generated = await run(
      process.execPath,
      [cli, `${server.url}/openapi.json`, "--output", join(dir, "api.ts")],
      {
        cwd: dir
      }
    )

    // Act: compile the program against them as strictly as this repository compiles itself.
    const compiled = ts.createProgram([join(dir, "client.ts")], {
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
      types: ["node"],
      skipLibCheck: true,
      noEmit: true
    })
    const problems = ts
      .getPreEmitDiagnostics(compiled)
      .map((d) => `${d.file?.fileName ?? ""}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`)

    // Assert: no lint error (the command would have failed) and no warning either.
    expect(`${generated.stdout}${generated.stderr}`).not.toMatch(/⚠|✘/)
    expect(problems).toEqual([])
    const js = ts.transpileModule(readFileSync(join(dir, "client.ts"), "utf8"), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 }
    }).outputText
    writeFileSync(join(dir, "client.mjs"), js)
    const { stdout } = await run(process.execPath, [join(dir, "client.mjs")], {
      cwd: dir,
      env: { ...process.env, SERVER_URL: server.url, TOKEN: token }
    })
    const result = JSON.parse(stdout)
    expect(result.submitted).toBe(202)
    expect(result.again).toBe(200)
    expect(result.sameJob).toBe(true)
    expect(result.listed).toHaveLength(1)
    expect(result.refused).toEqual([400, "invalid_request", ["limit"]])
    expect(result.state).toBe("queued")
    expect(result.queued).toBe(1)
    expect(result.limited).toEqual([200, "openai:gpt-4.1:org/key-a", 10])
    expect(result.pause).toBe("manual")
    expect(result.resources).toEqual([["openai:gpt-4.1:org/key-a", 0]])
    expect(result.batch).toEqual([202, 2, 100, 2])
    expect(result.defined).toEqual([200, "nightly/summary", "string"])
    expect(result.schedulePaused).toEqual([200, true])
    expect(result.badCron).toEqual([400, "invalid_request"])
    expect(result.schedules).toEqual([["nightly/summary", true]])
    expect(result.removed).toBe(204)
  })
})

describe("the document", () => {
  let open: Running
  let authenticated: Running
  let plain: Json = {}
  let withTokens: Json = {}

  beforeAll(async () => {
    open = await start(backend())
    authenticated = await start(backend(), { authenticate })
    plain = (await (await fetch(`${open.url}/openapi.json`)).json()) as Json
    withTokens = (await (
      await fetch(`${authenticated.url}/openapi.json`, { headers: { authorization: token } })
    ).json()) as Json
  })
  afterAll(async () => {
    await open?.close()
    await authenticated?.close()
  })

  it("names the API and this package's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
    expect(packageVersion).toBe(pkg.version)
    expect(plain.info.title).toBe("slowcall")
    expect(plain.info.version).toBe(pkg.version)
    expect(plain.info.description).toMatch(/idempotency key/)
  })

  it("gives every operation a summary and a description", () => {
    const all = operations(plain)
    expect(all.length).toBeGreaterThanOrEqual(13)
    for (const [method, path, operation] of all) {
      expect(operation.summary, `${method} ${path}`).toMatch(/\w/)
      expect(operation.description, `${method} ${path}`).toMatch(/\w{3}/)
    }
  })

  it("has no schema titles, no blank enum members, and integers as integers", () => {
    for (const [key, object] of objects(plain)) {
      // `properties` maps names to schemas, so a property named `title` is not a title.
      if (key !== "properties" && key !== "info") expect(object.title, JSON.stringify(object)).toBeUndefined()
      if (Array.isArray(object.enum)) expect(object.enum, JSON.stringify(object)).not.toContain("")
    }
    const query = (path: string, name: string) =>
      (plain.paths[path].get.parameters as Array<Json>).find((p) => p.in === "query" && p.name === name)!.schema
    expect(query("/v1/jobs", "limit")).toMatchObject({ type: "integer", minimum: 1, maximum: 1000 })
    expect(query("/v1/dead-letters", "limit")).toMatchObject({ type: "integer", minimum: 1, maximum: 1000 })
    expect(query("/v1/stats", "spendWindowMinutes")).toMatchObject({ type: "integer", minimum: 1 })
    expect(query("/v1/jobs", "state").enum).toEqual(["queued", "running", "succeeded", "failed", "abandoned"])
  })

  it("still takes a blank query parameter as absent", async () => {
    const response = await fetch(`${open.url}/v1/jobs?limit=&state=&errorClass=`)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ jobs: [], next: null, total: 0 })
  })

  it("declares the bearer scheme on the operations that need it, and none on an open server", () => {
    expect(withTokens.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" })
    })
    for (const [method, path, operation] of operations(withTokens)) {
      const needsToken = path.startsWith("/v1/") || path === "/metrics"
      expect(operation.security, `${method} ${path}`).toEqual(needsToken ? [{ bearer: [] }] : [])
      expect(Object.keys(operation.responses).includes("401"), `${method} ${path}`).toBe(needsToken)
    }
    expect(plain.components.securitySchemes).toBeUndefined()
    for (const [, , operation] of operations(plain)) {
      expect(operation.security).toEqual([])
      expect(operation.responses["401"]).toBeUndefined()
    }
  })

  it("documents every error as the API's own body, a stable code", () => {
    expect(JSON.stringify(withTokens)).not.toContain("HttpApiDecodeError")
    const schemas = withTokens.components.schemas as Json
    const statuses = new Set<string>()
    for (const [method, path, operation] of operations(withTokens)) {
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        if (Number(status) < 400) continue
        statuses.add(status)
        // One body per error code; a status with several codes (403: cross-site, operator only) lists each.
        const schema = response.content["application/json"].schema
        const refs: Array<string> = schema.anyOf === undefined ? [schema.$ref] : schema.anyOf.map((s: Json) => s.$ref)
        for (const ref of refs) {
          const body = schemas[ref.replace("#/components/schemas/", "")]
          expect(body.properties.error.enum, `${method} ${path} ${status}`).toHaveLength(1)
        }
        expect(response.description, `${method} ${path} ${status}`).not.toMatch(/^(Error|Success)$/)
      }
    }
    for (const status of ["400", "401", "403", "404", "409", "413", "415", "422", "429", "503"]) {
      expect(statuses).toContain(status)
    }
    expect(schemas.InvalidRequest.properties.error.enum).toEqual(["invalid_request"])
  })

  it("names the idempotency key as one concept wherever it travels", () => {
    const submit = plain.paths["/v1/jobs"].post
    const header = (submit.parameters as Array<Json>).find((p) => p.in === "header")!
    expect(header.name).toBe("Idempotency-Key")
    expect(header.description).toMatch(/^The idempotency key/)
    expect(header.description).toMatch(/`requestKey`/)
    const filter = (plain.paths["/v1/jobs"].get.parameters as Array<Json>).find((p) => p.name === "requestKey")!
    expect(filter.description).toMatch(/idempotency key/)
    expect(filter.description).toMatch(/`Idempotency-Key`/)
    expect(submit.description).toMatch(/idempotency key \(`Idempotency-Key`\)/)
  })
})

describe("the document of a server that knows its handlers", () => {
  const version = <A, I>(v: number, input: Schema.Schema<A, I>) =>
    Handler.make({
      type: "doc.resize",
      version: v,
      input,
      result: Schema.Struct({}),
      attempt: { timeoutMs: 1_000 },
      run: () => Effect.succeed({})
    })
  let server: Running
  let document: Json = {}

  beforeAll(async () => {
    server = await start(backend(), {
      jobTypes: ["doc.elsewhere"],
      handlers: [
        version(1, Schema.Struct({ width: Schema.Int.annotations({ description: "pixels" }) })),
        version(2, Schema.Struct({ width: Schema.Int, height: Schema.Int }))
      ]
    })
    document = (await (await fetch(`${server.url}/openapi.json`)).json()) as Json
  })
  afterAll(() => server?.close())

  it("has a submit body per job type: the handler's input for a known one, any input for the others", () => {
    const schemas = document.components.schemas as Json
    expect(document.paths["/v1/jobs"].post.requestBody.content["application/json"].schema).toEqual({
      oneOf: [
        { $ref: "#/components/schemas/SubmitBody.doc.resize" },
        { $ref: "#/components/schemas/SubmitBody.other" }
      ],
      discriminator: {
        propertyName: "type",
        mapping: {
          "doc.resize": "#/components/schemas/SubmitBody.doc.resize",
          "doc.elsewhere": "#/components/schemas/SubmitBody.other"
        }
      }
    })
    const known = schemas["SubmitBody.doc.resize"].properties
    expect(known.type.enum).toEqual(["doc.resize"])
    expect(known.version.enum).toEqual([1, 2])
    const inputs = schemas["Input.doc.resize"].anyOf as Array<Json>
    expect(inputs.map((input) => Object.keys(input.properties).sort())).toEqual([["width"], ["height", "width"]])
    expect(inputs[0]!.properties.width.description).toBe("pixels")
    // The types the server accepts, and no other (the others are a 400).
    expect(schemas["SubmitBody.other"].properties.type.enum).toEqual(["doc.elsewhere"])
    expect(schemas["SubmitBody.other"].properties.input).toEqual({
      description: expect.stringMatching(/any JSON value/)
    })
    expect(schemas.SubmitBody).toBeUndefined()
    // A batch's items are the same submit bodies.
    expect(schemas.SubmitBatchBody.properties.items.items).toEqual(
      document.paths["/v1/jobs"].post.requestBody.content["application/json"].schema
    )
  })
})
