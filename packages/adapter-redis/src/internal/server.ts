/**
 * What a Redis server keeps: its persistence and eviction settings, read with `CONFIG GET` (or `INFO` where a managed
 * service disables `CONFIG`), and the warnings they call for. On a Cluster every master is read.
 *
 * @internal
 */
import type { StoreError } from "@slowcall/core/Errors"
import { Effect } from "effect"
import { Cluster, type Redis } from "ioredis"
import { toStoreError } from "./errors.js"
import type { Client } from "./scripts.js"

/** @internal */
export interface NodeSettings {
  readonly node: string
  /** `yes` or `no`, or null when the server would not tell. */
  readonly appendonly: string | null
  readonly appendfsync: string | null
  /** The RDB snapshot rule (`""`: none), or null when unknown. */
  readonly save: string | null
  readonly maxmemoryPolicy: string | null
}

/** @internal */
export interface ServerCheck {
  readonly nodes: ReadonlyArray<NodeSettings>
  readonly warnings: ReadonlyArray<string>
  /** What each server with an append-only file keeps through a crash of Redis and through one of the machine. */
  readonly durability: ReadonlyArray<string>
}

const configOf = async (node: Redis): Promise<Omit<NodeSettings, "node">> => {
  try {
    const pairs = (await node.call("CONFIG", "GET", "*")) as Array<string>
    const config = new Map<string, string>()
    for (let i = 0; i < pairs.length; i += 2) config.set(pairs[i]!, pairs[i + 1]!)
    return {
      appendonly: config.get("appendonly") ?? null,
      appendfsync: config.get("appendfsync") ?? null,
      save: config.get("save") ?? null,
      maxmemoryPolicy: config.get("maxmemory-policy") ?? null
    }
  } catch {
    // CONFIG is often disabled on managed services; INFO tells the essentials.
    const info = (await node.info("persistence")) + (await node.info("memory"))
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim() ?? null
    const aof = field("aof_enabled")
    return {
      appendonly: aof === null ? null : aof === "1" ? "yes" : "no",
      appendfsync: null,
      save: null,
      maxmemoryPolicy: field("maxmemory_policy")
    }
  }
}

/**
 * The warnings one server's settings call for: nothing kept on disk, a lax fsync, eviction allowed.
 *
 * @internal
 */
export const warningsOf = (settings: NodeSettings): ReadonlyArray<string> => {
  const out: Array<string> = []
  const at = `Redis ${settings.node}`
  if (settings.appendonly === "no" && (settings.save === "" || settings.save === null)) {
    out.push(
      `${at} keeps nothing on disk (appendonly no, no RDB snapshots): a restart loses every job, attempt and charge. ` +
        "Such a Redis is no Store for jobs that cost money; turn on AOF (appendonly yes, appendfsync always or everysec)."
    )
  } else if (settings.appendonly === "no") {
    out.push(
      `${at} has no append-only file: a crash loses every write since the last RDB snapshot (save ${JSON.stringify(settings.save)}).`
    )
  } else if (settings.appendonly === "yes" && settings.appendfsync === "no") {
    out.push(`${at} writes its append-only file without fsync (appendfsync no): a machine crash loses recent writes.`)
  }
  if (settings.maxmemoryPolicy !== null && settings.maxmemoryPolicy !== "noeviction") {
    out.push(
      `${at} may evict keys (maxmemory-policy ${settings.maxmemoryPolicy}): a job record or a ledger row can vanish. ` +
        "Use maxmemory-policy noeviction for a job store."
    )
  }
  return out
}

/**
 * What one server with an append-only file keeps: a crash of Redis alone (`kill -9`) loses nothing the server
 * acknowledged, the writes being in the operating system already; a crash of the machine loses what was not yet
 * fsynced, which `appendfsync` decides. Servers without an append-only file get warnings instead (`warningsOf`).
 *
 * @internal
 */
export const durabilityOf = (settings: NodeSettings): ReadonlyArray<string> => {
  if (settings.appendonly !== "yes") return []
  const at = `Redis ${settings.node}`
  switch (settings.appendfsync) {
    case "always":
      return [
        `${at} fsyncs its append-only file before every reply (appendfsync always): a crash of Redis or of the ` +
          "machine loses no acknowledged job, attempt or charge."
      ]
    case "everysec":
      return [
        `${at} fsyncs its append-only file once a second (appendfsync everysec): a crash of Redis alone loses ` +
          "nothing, but a crash of the machine (power loss, kernel panic) can lose up to a second of acknowledged " +
          "jobs, attempts and charges. appendfsync always loses none of them (each write is fsynced before the " +
          "reply, at the cost of an fsync per write)."
      ]
    default:
      return []
  }
}

/**
 * Reads the settings of every server behind `client`.
 *
 * @internal
 */
export const check = (client: Client): Effect.Effect<ServerCheck, StoreError> =>
  Effect.tryPromise({
    try: async () => {
      const servers: ReadonlyArray<Redis> = client instanceof Cluster ? client.nodes("master") : [client]
      const nodes = await Promise.all(
        servers.map(async (server) => ({
          node: `${server.options.host ?? "?"}:${server.options.port ?? "?"}`,
          ...(await configOf(server))
        }))
      )
      return { nodes, warnings: nodes.flatMap(warningsOf), durability: nodes.flatMap(durabilityOf) }
    },
    catch: (error) => toStoreError("checkServer", error, false)
  })
