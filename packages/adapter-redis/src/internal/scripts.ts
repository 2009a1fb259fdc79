/**
 * The Lua scripts: read once from `src/lua/`, composed (the key layout of `keys.ts`, then each `-- @include name`
 * line replaced by `lua/includes/<name>.lua`, every include at most once), hashed, and run by SHA: `EVALSHA`, and on
 * `NOSCRIPT` (a server that restarted, a failover, a new Cluster node) `EVAL` with the source, which also caches it
 * there for the next `EVALSHA`.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import type { Cluster, Redis } from "ioredis"
import { guarded } from "./guard.js"
import { luaKeys } from "./keys.js"

/** The scripts, by name (their file names without `.lua`). */
export const names = [
  "submit",
  "claim",
  "claimNext",
  "claimNextFair",
  "heartbeat",
  "charge",
  "settle",
  "cycle",
  "cancel",
  "replay",
  "sweep",
  "get",
  "list",
  "count",
  "deadLetters",
  "stats",
  "receive",
  "hide",
  "purge",
  "retract",
  "limitDefine",
  "limitApply",
  "limitResume",
  "limitRead",
  "batchOpen",
  "batchAdd",
  "batchGet",
  "batchCancel",
  "batchReplay",
  "batchJobs"
] as const

/** @internal */
export type ScriptName = (typeof names)[number]

/** @internal */
export interface Script {
  readonly name: ScriptName
  readonly source: string
  readonly sha: string
}

const luaDir = new URL("../lua/", import.meta.url)

const read = (path: string): string => readFileSync(new URL(path, luaDir), "utf8")

const INCLUDE = /^-- @include (\w+)\s*$/

/**
 * The composed source of one script: its shebang line (if any), the generated key layout, then its lines with each
 * include replaced by the include's own composed lines.
 *
 * @internal
 */
export const compose = (name: string): string => {
  const included = new Set<string>()
  const expand = (text: string): Array<string> =>
    text.split("\n").flatMap((line) => {
      const match = INCLUDE.exec(line)
      if (match === null) return [line]
      const include = match[1]!
      if (included.has(include)) return []
      included.add(include)
      return [`-- include ${include}`, ...expand(read(`includes/${include}.lua`))]
    })
  const lines = read(`${name}.lua`).split("\n")
  const shebang = lines[0]?.startsWith("#!") === true ? [lines.shift()!] : []
  return [...shebang, luaKeys(), ...expand(lines.join("\n"))].join("\n")
}

const load = (name: ScriptName): Script => {
  const source = compose(name)
  return { name, source, sha: createHash("sha1").update(source).digest("hex") }
}

let cache: Map<ScriptName, Script> | undefined

/**
 * Every script, composed once per process.
 *
 * @internal
 */
export const all = (): ReadonlyMap<ScriptName, Script> => {
  cache ??= new Map(names.map((name) => [name, load(name)]))
  return cache
}

/** A client of either kind. */
export type Client = Redis | Cluster

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/**
 * Runs a script by SHA with its declared keys and arguments; on `NOSCRIPT` sends the source once (`EVAL`).
 *
 * @internal
 */
export const run = async (
  client: Client,
  name: ScriptName,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string>
): Promise<unknown> => {
  const script = all().get(name)!
  return guarded(client, async () => {
    try {
      return await client.evalsha(script.sha, keys.length, ...keys, ...args)
    } catch (error) {
      if (!isNoScript(error)) throw error
      return await client.eval(script.source, keys.length, ...keys, ...args)
    }
  })
}
