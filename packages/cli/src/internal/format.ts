/**
 * Plain-text rendering for the read commands.
 *
 * @internal
 */
import { attemptsText } from "@slowcall/http/View"

/** @internal */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

/** @internal */
export const cents = (value: number | null | undefined): string =>
  value === null || value === undefined ? "-" : `${Math.round(value * 100) / 100}¢`

/**
 * A page of jobs as the API lists them (`GET /v1/jobs`, `GET /v1/batches/{id}/jobs`): a table, and the flag that
 * reads the next page when there is one. @internal
 */
export const jobPageText = (page: { readonly jobs: ReadonlyArray<any>; readonly next: string | null }): string => {
  if (page.jobs.length === 0) return "no jobs"
  const rows = table(
    ["ID", "TYPE", "STATE", "ATTEMPTS", "COST", "ERROR", "UPDATED"],
    page.jobs.map((job) => [
      job.id,
      job.type,
      job.state,
      attemptsText(job),
      cents(job.costCents),
      job.errorClass ?? "",
      job.updatedAt
    ])
  )
  return page.next === null ? rows : `${rows}\nnext page: --after ${page.next}`
}

/** At most `width` characters of `text` on one line, `…` last when cut. @internal */
export const clip = (text: string, width: number): string => {
  const line = text.replace(/\s*\n\s*/g, " ")
  const chars = [...line]
  return chars.length <= width ? line : `${chars.slice(0, width - 1).join("")}…`
}

/** A labelled field over several lines: the label on the first, the rest indented under the value. */
const field = (label: string, text: string): ReadonlyArray<string> =>
  text.split("\n").map((line, i) => `${i === 0 ? label.padEnd(13) : " ".repeat(13)}${line}`)

/**
 * The input as the job view gives it (redacted by the server): pretty JSON, the preview when the input was too large
 * to show whole, or the reference of input kept elsewhere.
 */
const inputLines = (job: any): ReadonlyArray<string> => {
  if (job.inputRef != null) return field("input ref", String(job.inputRef))
  if (job.inputTruncated === true) return field("input", `${job.inputPreview} (over 8 KB: first 300 characters)`)
  if (!("input" in job)) return []
  return field("input", JSON.stringify(job.input, null, 2))
}

/** @internal */
export const jobLines = (job: any): string =>
  [
    `id           ${job.id}`,
    `type         ${job.type} v${job.version}`,
    `state        ${job.state}${job.abandonReason ? ` (${job.abandonReason})` : ""}`,
    `attempts     ${attemptsText(job)}`,
    `progress     ${Math.round(job.progress * 100)}%`,
    `cost         ${cents(job.costCents)}${job.budgetCents === null ? "" : ` of ${cents(job.budgetCents)}`}`,
    ...inputLines(job),
    ...(job.errorClass ? [`error class  ${job.errorClass}`] : []),
    ...(job.lastError ? [`last error   ${String(job.lastError).split("\n")[0]}`] : []),
    ...(job.result !== null ? [`result       ${JSON.stringify(job.result)}`] : []),
    `created      ${job.createdAt}`,
    `updated      ${job.updatedAt}`
  ].join("\n")
