/**
 * What the two property scripts (`property.ts`, `concurrent-property.ts`) share: their arguments, the server they
 * run on, and the run itself: the property's figures or its failure report, then one JSON line
 * `{ ok, ...figures, failure }`, the server schema dropped after, and exit 1 when the property failed.
 */
import pg from "pg"

const args = process.argv.slice(2)

/** The script's arguments, as given. */
export const argv: ReadonlyArray<string> = args

/** The value after `--name`, when given. */
export const value = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args[i + 1] : undefined
}

/** Whether `--name` is given. */
export const flag = (name: string): boolean => args.includes(`--${name}`)

/** The test server (DATABASE_URL). */
export const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const dropSchema = async (schema: string): Promise<void> => {
  const client = new pg.Client({ connectionString: url })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

/**
 * Runs the property and reports it: `figures` prints a passing run's figures; `schema`, when the run used the
 * server, is dropped after either way. Never returns.
 */
export const report = async <R extends object>(
  run: () => Promise<R>,
  figures: (result: R) => string,
  schema: string | undefined
): Promise<never> => {
  let outcome: { readonly ok: boolean; readonly failure: string | null } & Partial<R>
  try {
    const result = await run()
    console.log(figures(result))
    outcome = { ok: true, failure: null, ...result }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    console.log(message)
    outcome = { ok: false, failure: message.split("\n")[0] ?? message } as typeof outcome
  } finally {
    if (schema !== undefined) await dropSchema(schema)
  }
  console.log(JSON.stringify(outcome))
  process.exit(outcome.ok ? 0 : 1)
}
