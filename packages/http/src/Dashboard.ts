/**
 * The dashboard: one static HTML page with its CSS and JavaScript inline (no CDN, no build step), served at `/`.
 * It reads only the public API (`/v1/stats`, `/v1/jobs`, `/v1/jobs/{id}/detail`, `/v1/jobs/{id}/events`,
 * `/v1/dead-letters`, `/v1/resources`, `/v1/schedules`, `/v1/batches/{id}`, `/v1/batches/{id}/jobs`), so whatever it
 * shows, a client of the API can see too, and its writes (submit, cancel, replay, resume a resource, pause a
 * schedule, cancel or replay a batch) are the API's JSON `POST`s, which no page of another site can send.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { ErrorClass } from "@slowcall/core/ErrorClass"

/**
 * The page's HTML, read once when the module loads, with the error classes of `@slowcall/core` filled in (its
 * filter lists them).
 *
 * @since 0.1.0
 * @category constructors
 */
export const html: string = readFileSync(new URL("./internal/dashboard.html", import.meta.url), "utf8").replace(
  "__ERROR_CLASSES__",
  JSON.stringify(ErrorClass.literals)
)
