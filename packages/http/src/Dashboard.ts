/**
 * The dashboard: one static HTML page with its CSS and JavaScript inline (no CDN, no build step), served at `/`.
 * It reads only the public API (`/v1/stats`, `/v1/jobs`, `/v1/jobs/{id}/detail`, `/v1/jobs/{id}/events`,
 * `/v1/dead-letters`), so whatever it shows, a client of the API can see too.
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
