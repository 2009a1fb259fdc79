/**
 * Plain-text rendering for the read commands.
 *
 * @internal
 */

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

/** @internal */
export const jobLines = (job: any): string =>
  [
    `id           ${job.id}`,
    `type         ${job.type} v${job.version}`,
    `state        ${job.state}${job.abandonReason ? ` (${job.abandonReason})` : ""}`,
    `attempts     ${job.attempts} of ${job.maxAttempts}`,
    `progress     ${Math.round(job.progress * 100)}%`,
    `cost         ${cents(job.costCents)}${job.budgetCents === null ? "" : ` of ${cents(job.budgetCents)}`}`,
    ...(job.errorClass ? [`error class  ${job.errorClass}`] : []),
    ...(job.lastError ? [`last error   ${String(job.lastError).split("\n")[0]}`] : []),
    ...(job.result !== null ? [`result       ${JSON.stringify(job.result)}`] : []),
    `created      ${job.createdAt}`,
    `updated      ${job.updatedAt}`
  ].join("\n")

/** A progress bar for long operations, drawn on one line. @internal */
export const bar = (done: number, total: number, width = 30): string => {
  const ratio = total === 0 ? 1 : Math.min(1, done / total)
  const filled = Math.round(ratio * width)
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total}`
}
