/**
 * Standard Schema v1 (the `~standard` interface that zod, valibot, effect's `Schema.standardSchemaV1`, arktype and
 * others implement), declared here so that no validator is a dependency, and the two places it is used: checking a
 * submit's input before anything is written, and the effect Schemas through which the worker decodes a job's input
 * and checks a handler's result, so a job whose input or result fails ends the way the core ends it
 * (`failed(invalid_input)`, or a failed result), never by a rule of this package.
 *
 * @since 0.1.0
 */
import { Effect, ParseResult, Schema } from "effect"
import { InvalidInput, type Issue } from "./Errors.js"

/**
 * The Standard Schema v1 interface: `validate` returns the output value or the issues, synchronously or not.
 *
 * @since 0.1.0
 * @category models
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1
    readonly vendor: string
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>
    readonly types?: { readonly input: Input; readonly output: Output } | undefined
  }
}

/**
 * What `validate` gives: the value, or at least one issue.
 *
 * @since 0.1.0
 * @category models
 */
export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
      }>
    }

/**
 * The output type of a Standard Schema.
 *
 * @since 0.1.0
 * @category models
 */
export type OutputOf<S> = S extends StandardSchemaV1<any, infer O> ? O : unknown

/**
 * Whether a value is a Standard Schema v1 (has a `~standard` object of version 1 with a `validate` function).
 *
 * @since 0.1.0
 * @category guards
 */
export const isStandardSchema = (value: unknown): value is StandardSchemaV1 => {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return false
  const standard = (value as { readonly "~standard"?: unknown })["~standard"]
  return (
    typeof standard === "object" &&
    standard !== null &&
    (standard as { version?: unknown }).version === 1 &&
    typeof (standard as { validate?: unknown }).validate === "function"
  )
}

const issuesOf = (result: StandardResult<unknown>): ReadonlyArray<Issue> | undefined =>
  result.issues === undefined
    ? undefined
    : result.issues.map((issue) => ({
        message: issue.message,
        path: (issue.path ?? []).map((segment) =>
          typeof segment === "object" && segment !== null ? segment.key : segment
        )
      }))

/**
 * Validate `value`: the schema's output, or `InvalidInput` listing the issues.
 *
 * @since 0.1.0
 * @category combinators
 */
export const validate = async <O>(schema: StandardSchemaV1<unknown, O>, value: unknown): Promise<O> => {
  const result = await schema["~standard"].validate(value)
  const issues = issuesOf(result)
  if (issues !== undefined) throw new InvalidInput(issues.length > 0 ? issues : [{ message: "invalid", path: [] }])
  return (result as { readonly value: O }).value
}

const check = (schema: StandardSchemaV1 | undefined, value: unknown, ast: Schema.Schema.AnyNoContext["ast"]) =>
  schema === undefined
    ? ParseResult.succeed(value)
    : Effect.flatMap(
        Effect.promise(async () => schema["~standard"].validate(value)),
        (result): Effect.Effect<unknown, ParseResult.ParseIssue> => {
          const issues = issuesOf(result)
          if (issues === undefined) return Effect.succeed((result as { readonly value: unknown }).value)
          const text = issues.map((i) => (i.path.length ? `${i.path.map(String).join(".")}: ` : "") + i.message)
          return Effect.fail(new ParseResult.Type(ast, value, text.join("; ")))
        }
      )

/**
 * The effect Schema the worker decodes a job's input with: decoding validates with `schema` (the job's stored
 * input is what the submitter gave; the handler gets the validator's output). Without a schema, any JSON passes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const inputSchema = (schema: StandardSchemaV1 | undefined): Schema.Schema<unknown> =>
  Schema.transformOrFail(Schema.Unknown, Schema.Unknown, {
    strict: true,
    decode: (value, _, ast) => check(schema, value, ast),
    encode: (value) => ParseResult.succeed(value)
  })

/**
 * The effect Schema the worker checks a handler's result with: encoding validates with `schema` and stores the
 * validator's output. Without a schema, any JSON passes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resultSchema = (schema: StandardSchemaV1 | undefined): Schema.Schema<unknown> =>
  Schema.transformOrFail(Schema.Unknown, Schema.Unknown, {
    strict: true,
    decode: (value) => ParseResult.succeed(value),
    encode: (value, _, ast) => check(schema, value, ast)
  })
