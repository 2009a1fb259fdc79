/**
 * The adapter packages are optional peer dependencies: `open` imports the one a URL names when it first needs it, so
 * an application installs only the adapters its URLs use (no Redis client or AWS SDK beside a PGlite queue). A
 * package that is not installed becomes `AdapterNotInstalled` naming it; any other failure to load one (a broken
 * install, a dependency of the adapter missing) stays the error it is, as a defect.
 *
 * The specifiers are string literals so that a bundler includes each adapter the application has installed.
 *
 * @internal
 */
import { Effect } from "effect"
import { AdapterNotInstalled } from "../Errors.js"

/** @internal */
export interface Adapter<A> {
  readonly packageName: string
  readonly load: () => Promise<A>
}

/** @internal */
export const postgres: Adapter<typeof import("@slowcall/adapter-postgres")> = {
  packageName: "@slowcall/adapter-postgres",
  load: () => import("@slowcall/adapter-postgres")
}

/** @internal */
export const redis: Adapter<typeof import("@slowcall/adapter-redis")> = {
  packageName: "@slowcall/adapter-redis",
  load: () => import("@slowcall/adapter-redis")
}

/** @internal */
export const sqs: Adapter<typeof import("@slowcall/adapter-sqs")> = {
  packageName: "@slowcall/adapter-sqs",
  load: () => import("@slowcall/adapter-sqs")
}

/**
 * Whether an import failed because the package itself cannot be found. Node (and the loaders built on its resolver)
 * says `Cannot find package '<name>' imported from <file>` with code `ERR_MODULE_NOT_FOUND`; the quotes matter, as a
 * dependency missing inside the adapter names the adapter's path unquoted.
 *
 * @internal
 */
export const isNotInstalled = (error: unknown, packageName: string): boolean =>
  error instanceof Error &&
  (error as Error & { readonly code?: unknown }).code === "ERR_MODULE_NOT_FOUND" &&
  (error.message.includes(`'${packageName}'`) || error.message.includes(`"${packageName}"`))

/**
 * The adapter's module; `AdapterNotInstalled` (saying it is needed for `use`) when its package is not installed.
 *
 * @internal
 */
export const load = <A>(adapter: Adapter<A>, use: string): Effect.Effect<A, AdapterNotInstalled> =>
  Effect.tryPromise({ try: () => adapter.load(), catch: (error) => error }).pipe(
    Effect.catchAll((error) =>
      isNotInstalled(error, adapter.packageName)
        ? Effect.fail(new AdapterNotInstalled(adapter.packageName, use, { cause: error }))
        : Effect.die(error)
    )
  )
