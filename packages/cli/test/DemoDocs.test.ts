/**
 * Every option of every demo job type is documented where a user looks: in the OpenAPI document of a server that runs
 * the demo handlers (a description per input field) and in the HTTP guide's demo section. The options are read from
 * the handlers' own input schemas, so an option added to `Demo.ts` without its description or its line in the guide
 * fails here. The examples the schemas carry are inputs the handlers accept.
 */
import { readFileSync } from "node:fs"
import { HttpServer } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Server from "@slowcall/http/Server"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer, ManagedRuntime, Option, Schema, SchemaAST } from "effect"
import * as Demo from "../src/Demo.js"

/** The input fields of a handler, from its schema. */
const fieldsOf = (input: Schema.Schema.Any): Array<string> =>
  SchemaAST.getPropertySignatures(input.ast).map((signature) => String(signature.name))

/** The guide's demo section: from its heading to the next one of the same level. */
const demoSection = (): string => {
  const guide = readFileSync(new URL("../../../docs/guide/http.md", import.meta.url), "utf8")
  const start = guide.indexOf("\n## Demo job types")
  expect(start).toBeGreaterThan(0)
  const end = guide.indexOf("\n## ", start + 1)
  return guide.slice(start, end < 0 ? undefined : end)
}

describe("the demo job types' documentation", () => {
  const runtime = ManagedRuntime.make(
    Server.layerNode({ port: 0, handlers: [...Demo.handlers] }).pipe(
      Layer.provideMerge(
        Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
      )
    )
  )
  let document: { components: { schemas: Record<string, any> }; paths: Record<string, any> } = {
    components: { schemas: {} },
    paths: {}
  }

  beforeAll(async () => {
    const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
    if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
    document = (await (await fetch(`http://127.0.0.1:${address.port}/openapi.json`)).json()) as typeof document
  })
  afterAll(() => runtime.dispose())

  it("the served OpenAPI document describes every input field of every demo job type", () => {
    expect(Demo.handlers.length).toBeGreaterThanOrEqual(3)
    const submit = document.paths["/v1/jobs"].post
    for (const handler of Demo.handlers) {
      const input = document.components.schemas[`Input.${handler.type}`]
      expect(input, handler.type).toBeDefined()
      expect(input.description, handler.type).toMatch(/\w/)
      for (const field of fieldsOf(handler.input)) {
        expect(input.properties[field]?.description, `${handler.type}.${field}`).toMatch(/\w{3}/)
      }
      const body = document.components.schemas[`SubmitBody.${handler.type}`]
      expect(body.properties.type.enum).toEqual([handler.type])
      expect(body.properties.input).toEqual({ $ref: `#/components/schemas/Input.${handler.type}` })
      expect(submit.description).toContain(`\`${handler.type}\``)
    }
    expect(fieldsOf(Demo.echo.input)).toEqual(
      expect.arrayContaining(["failWith", "failTimes", "latencyMs", "costCents"])
    )
  })

  it("the HTTP guide's demo section names every demo job type and every input field", () => {
    const section = demoSection()
    for (const handler of Demo.handlers) {
      expect(section, handler.type).toContain(`\`${handler.type}\``)
      for (const field of fieldsOf(handler.input)) expect(section, `${handler.type}.${field}`).toContain(`\`${field}\``)
    }
  })

  it("the examples in the document are inputs the handlers accept", () => {
    let examples = 0
    for (const handler of Demo.handlers) {
      const decode = Schema.decodeUnknownOption(handler.input as Schema.Schema<unknown, unknown>)
      for (const example of document.components.schemas[`Input.${handler.type}`].examples ?? []) {
        expect(Option.isSome(decode(example)), JSON.stringify(example)).toBe(true)
        examples++
      }
    }
    expect(examples).toBeGreaterThanOrEqual(Demo.handlers.length)
  })
})
