/**
 * The OpenAPI document of the API, in two steps over what `@effect/platform`'s `OpenApi.fromApi` generates from
 * `Api.ts`:
 *
 * - `tidy` (the API's own transform, so every document generated from `SlowcallApi` has it): no schema titles (the
 *   platform names each filter, `maxLength(255)`, and client generators turn those into noise), header parameters
 *   spelled as clients send them (`Idempotency-Key`), and no platform decoding error: the server answers every
 *   request that does not decode with the API's own `400` body (`InvalidRequest`), so that is the only `400` shape.
 * - `forServer` (what `/openapi.json` of one server answers): the document narrowed to that server. The job types it
 *   accepts become the enum of the submit body's `type`; a type whose handlers the server knows gets a submit body
 *   of its own whose `input` is the handler's input schema (field descriptions and examples included); without
 *   authentication no operation asks for the bearer token, and a public `/metrics` never does.
 *
 * Both are pure functions of JSON values: the document is data, and the tests read it as a client would.
 *
 * @internal
 */
import type * as Handler from "@slowcall/core/Handler"
import { JSONSchema } from "effect"

/**
 * The version of `@slowcall/http`, shown as the document's `info.version`. A test keeps it equal to the package's
 * own `package.json` (a JSON import would not survive the package's build, whose root is `src`).
 *
 * @internal
 */
export const packageVersion = "0.1.0"

type Json = { [key: string]: any }

const ref = (name: string) => `#/components/schemas/${name}`

/** The keywords whose value is a map of schemas, a list of schemas, or one schema (JSON Schema 2020-12). */
const schemaMaps = new Set(["properties", "patternProperties", "$defs", "dependentSchemas"])
const schemaLists = new Set(["anyOf", "allOf", "oneOf", "prefixItems"])
const schemaSingles = new Set([
  "items",
  "additionalProperties",
  "unevaluatedProperties",
  "not",
  "propertyNames",
  "contains",
  "if",
  "then",
  "else"
])

/**
 * A schema without the titles Effect derives from its filters (`maxLength(255)`, `int`, `between(1, 1000)`) and
 * without its `$id` markers of `unknown` and `object` (`/schemas/unknown`): an unconstrained value is `{}`.
 */
const tidySchema = (schema: unknown): unknown => {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return schema
  const out: Json = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === "title") continue
    if (key === "$id" && typeof value === "string" && value.startsWith("/schemas/")) continue
    if (schemaMaps.has(key) && typeof value === "object" && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, inner]) => [name, tidySchema(inner)]))
    } else if (schemaLists.has(key) && Array.isArray(value)) {
      out[key] = value.map(tidySchema)
    } else if (schemaSingles.has(key)) {
      out[key] = tidySchema(value)
    } else {
      out[key] = value
    }
  }
  return out
}

/** The platform's own decoding error, which this server never sends (it answers `InvalidRequest` instead). */
const platformDecodeError = ref("HttpApiDecodeError")

/** A response schema without the platform's decoding error among its alternatives; undefined if nothing is left. */
const withoutDecodeError = (schema: Json): Json | undefined => {
  if (schema.$ref === platformDecodeError) return undefined
  if (!Array.isArray(schema.anyOf)) return schema
  const rest = schema.anyOf.filter((member: Json) => member.$ref !== platformDecodeError)
  if (rest.length === schema.anyOf.length) return schema
  if (rest.length === 0) return undefined
  const { anyOf: _, ...others } = schema
  return rest.length === 1 && Object.keys(others).length === 0 ? rest[0] : { ...others, anyOf: rest }
}

const operationsOf = (spec: Json): Array<Json> =>
  Object.values(spec.paths ?? {}).flatMap((item: any) => Object.values(item ?? {}) as Array<Json>)

/** Every `$ref` in a JSON value. */
const refsIn = (value: unknown, into: Set<string>): Set<string> => {
  if (Array.isArray(value)) for (const item of value) refsIn(item, into)
  else if (typeof value === "object" && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "$ref" && typeof inner === "string") into.add(inner)
      else refsIn(inner, into)
    }
  }
  return into
}

/** Drops the component schemas nothing refers to any more (the platform's decoding error and its parts). */
const pruneSchemas = (spec: Json): void => {
  const schemas: Json = spec.components?.schemas ?? {}
  for (let round = 0; round < 10; round++) {
    const used = refsIn({ ...spec, components: { ...spec.components, schemas: undefined } }, new Set())
    for (const schema of Object.values(schemas)) refsIn(schema, used)
    const unused = Object.keys(schemas).filter((name) => !used.has(ref(name)))
    if (unused.length === 0) return
    for (const name of unused) delete schemas[name]
  }
}

/**
 * The API's transform of the generated document (see the module comment). `headerNames` maps a header as the
 * schemas name it (lower case) to its usual spelling.
 *
 * @internal
 */
export const tidy = (spec: Json, headerNames: Readonly<Record<string, string>>): Json => {
  const out: Json = structuredClone(spec)
  const schemas: Json = out.components?.schemas ?? {}
  for (const name of Object.keys(schemas)) schemas[name] = tidySchema(schemas[name])
  for (const operation of operationsOf(out)) {
    for (const parameter of operation.parameters ?? []) {
      parameter.schema = tidySchema(parameter.schema)
      if (parameter.in === "header" && Object.hasOwn(headerNames, parameter.name)) {
        parameter.name = headerNames[parameter.name]
      }
    }
    for (const media of Object.values(operation.requestBody?.content ?? {}) as Array<Json>) {
      media.schema = tidySchema(media.schema)
    }
    for (const [status, response] of Object.entries(operation.responses ?? {}) as Array<[string, Json]>) {
      for (const [type, media] of Object.entries(response.content ?? {}) as Array<[string, Json]>) {
        const schema = withoutDecodeError(tidySchema(media.schema) as Json)
        if (schema === undefined) delete response.content[type]
        else media.schema = schema
        // The response's description came from the first alternative, the platform's error: take the API's own.
        if (status === "400" && schema?.$ref !== undefined) {
          const description = schemas[schema.$ref.slice(ref("").length)]?.description
          if (typeof description === "string") response.description = description
        }
      }
    }
  }
  pruneSchemas(out)
  return out
}

/**
 * What `forServer` needs to know of a server.
 *
 * @internal
 */
export interface ServerFacts {
  /** Every job type the server accepts at submit (the others are a `400`). */
  readonly jobTypes: ReadonlySet<string>
  /** The handlers it knows, by type: their versions and input schemas. */
  readonly handlers: ReadonlyMap<string, ReadonlyArray<Handler.Handler<any, any, any>>>
  /** Whether requests need credentials (`authenticate` or `tokens`). */
  readonly authenticated: boolean
  /** Whether `/metrics` is open without credentials. */
  readonly publicMetrics: boolean
}

/** A component name for a job type's schemas (letters, digits, `.`, `-`, `_` only, as OpenAPI asks). */
const componentName = (prefix: string, type: string): string => `${prefix}.${type.replace(/[^A-Za-z0-9._-]/g, "_")}`

/**
 * The JSON Schema of a handler's input as it is sent (the encoded side), its named parts added to `schemas` under
 * names not taken yet; a schema JSON Schema cannot express (a declaration without an annotation) is `{}`.
 */
const inputSchema = (handler: Handler.Handler<any, any, any>, schemas: Json): Json => {
  const definitions: Json = {}
  try {
    // The schema as sent (JSON Schema describes a transformation's encoded side); a handler's decoding keeps
    // fields it does not know, so the document allows them too.
    const schema = JSONSchema.fromAST(handler.input.ast, {
      definitions,
      definitionPath: ref(""),
      target: "openApi3.1",
      topLevelReferenceStrategy: "skip",
      additionalPropertiesStrategy: "allow"
    })
    for (const [name, definition] of Object.entries(definitions)) {
      if (!Object.hasOwn(schemas, name)) schemas[name] = tidySchema(definition)
    }
    return tidySchema(schema) as Json
  } catch {
    return { description: "an input this document cannot describe: see the handler's schema" }
  }
}

/** The submit operation's own paragraph on this server's job types. */
const typesParagraph = (facts: ServerFacts): string => {
  const types = [...facts.jobTypes].sort()
  const lines = types.map((type) => {
    const handlers = facts.handlers.get(type)
    if (handlers === undefined) return `- \`${type}\`: any version, any JSON input (no handler here checks it)`
    const versions = handlers.map((handler) => handler.version).sort((a, b) => a - b)
    return `- \`${type}\`: version ${versions.join(", ")}; \`input\` as the \`${componentName("Input", type)}\` schema says`
  })
  return `This server accepts these job types (any other is a \`400\`):\n\n${lines.join("\n")}`
}

/** One submit body per job type with a known handler, its `input` the handler's; the other accepted types share one. */
const narrowSubmit = (out: Json, facts: ServerFacts): void => {
  const schemas: Json = out.components.schemas
  const submit: Json | undefined = out.paths?.["/v1/jobs"]?.post
  const body: Json | undefined = schemas.SubmitBody
  if (submit === undefined || body === undefined || facts.jobTypes.size === 0) return
  submit.description = [submit.description, typesParagraph(facts)].filter((text) => text !== undefined).join("\n\n")
  if (facts.handlers.size === 0) {
    body.properties.type = { ...body.properties.type, enum: [...facts.jobTypes].sort() }
    return
  }
  const variants: Record<string, string> = {}
  for (const [type, handlers] of [...facts.handlers].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const inputName = componentName("Input", type)
    const inputs = handlers.map((handler) => ({ version: handler.version, schema: inputSchema(handler, schemas) }))
    schemas[inputName] =
      inputs.length === 1
        ? inputs[0]!.schema
        : {
            description: `the input of ${type}, by version (${inputs.map((input) => input.version).join(", ")})`,
            anyOf: inputs.map((input) => input.schema)
          }
    const bodyName = componentName("SubmitBody", type)
    schemas[bodyName] = {
      ...body,
      description: `A submit of a \`${type}\` job.`,
      properties: {
        ...body.properties,
        type: { type: "string", enum: [type] },
        version: {
          type: "integer",
          enum: handlers.map((handler) => handler.version).sort((a, b) => a - b),
          description: "the handler version to run (default 1)"
        },
        input: { $ref: ref(inputName) }
      }
    }
    variants[type] = ref(bodyName)
  }
  const loose = [...facts.jobTypes].filter((type) => !facts.handlers.has(type)).sort()
  if (loose.length > 0) {
    schemas["SubmitBody.other"] = {
      ...body,
      description: "A submit of a job type whose handler this server does not know: any version, any JSON input.",
      properties: { ...body.properties, type: { ...body.properties.type, enum: loose } }
    }
    for (const type of loose) variants[type] = ref("SubmitBody.other")
  }
  const distinct = [...new Set(Object.values(variants))].map(($ref) => ({ $ref }))
  const narrowed = (): Json =>
    distinct.length === 1
      ? distinct[0]!
      : { oneOf: distinct, discriminator: { propertyName: "type", mapping: variants } }
  const media = submit.requestBody?.content?.["application/json"]
  if (media !== undefined) media.schema = narrowed()
  // Each item of a batch is a submit body: the same variants.
  const batchItems: Json | undefined = schemas.SubmitBatchBody?.properties?.items
  if (batchItems !== undefined) batchItems.items = narrowed()
}

/** Without authentication no operation asks for the token; a public `/metrics` does not either. */
const narrowSecurity = (out: Json, facts: ServerFacts): void => {
  for (const [path, item] of Object.entries(out.paths ?? {}) as Array<[string, Json]>) {
    if (facts.authenticated && !(path === "/metrics" && facts.publicMetrics)) continue
    for (const operation of Object.values(item) as Array<Json>) {
      operation.security = []
      delete operation.responses?.["401"]
    }
  }
  if (!facts.authenticated) delete out.components.securitySchemes
}

/**
 * The document one server serves: `tidy`'s document narrowed to the server's job types, handlers and
 * authentication (see the module comment).
 *
 * @internal
 */
export const forServer = (spec: Json, facts: ServerFacts): Json => {
  const out: Json = structuredClone(spec)
  narrowSubmit(out, facts)
  narrowSecurity(out, facts)
  pruneSchemas(out)
  return out
}
