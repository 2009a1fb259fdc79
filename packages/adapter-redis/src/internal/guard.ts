/**
 * Keeps a connection in step with its server after a command timed out. ioredis matches replies to commands in the
 * order it sent them and does not forget a command whose `commandTimeout` fired: if the server never got that
 * command (a black-holed network), every later reply would be handed to the wrong command. So a timed-out command
 * drops its connection (ioredis connects again at once); the other commands in flight fail with it, and are
 * reported as ambiguous writes, which is what they are.
 *
 * @internal
 */
import type { Client } from "./scripts.js"

const resetAt = new WeakMap<Client, number>()

/** Whether an error is ioredis's command timeout. */
export const isCommandTimeout = (error: unknown): boolean =>
  error instanceof Error && error.message === "Command timed out"

/**
 * Runs `f`; when it fails with a command timeout, drops `client`'s connection (at most once per second) so the
 * next command starts on a fresh one, and fails as it did.
 *
 * @internal
 */
export const guarded = async <A>(client: Client, f: () => Promise<A>): Promise<A> => {
  try {
    return await f()
  } catch (error) {
    if (isCommandTimeout(error)) {
      const now = performance.now()
      if (now - (resetAt.get(client) ?? Number.NEGATIVE_INFINITY) > 1_000) {
        resetAt.set(client, now)
        client.disconnect(true)
      }
    }
    throw error
  }
}
