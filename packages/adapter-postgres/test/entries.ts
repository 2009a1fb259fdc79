/**
 * Migration 0015's invariant as one query, for the tests and the property script (`scripts/property.ts`), which
 * checks it after the sequences on the server so that a planted bug in the entries' triggers is caught.
 */

/**
 * The rows that break migration 0015's invariant in `schema`: every job has exactly one entry, in the table of its
 * state, with the job's columns, and no entry exists without its job. Each row names the table and whether the entry
 * is `missing` (the job has no such entry) or `extra` (an entry no job explains); none when the invariant holds.
 */
export const entryMismatches = (
  driver: { readonly query: (sql: string) => Promise<ReadonlyArray<Record<string, unknown>>> },
  schema: string
): Promise<ReadonlyArray<Record<string, unknown>>> => {
  const s = `"${schema}"`
  const table = (name: string, columns: string, derived: string, where: string) => `
    (SELECT '${name}' AS entries, 'missing' AS kind, x.* FROM (
      SELECT ${derived} FROM ${s}.jobs j WHERE ${where} EXCEPT ALL SELECT ${columns} FROM ${s}.${name}) x)
    UNION ALL
    (SELECT '${name}', 'extra', x.* FROM (
      SELECT ${columns} FROM ${s}.${name} EXCEPT ALL SELECT ${derived} FROM ${s}.jobs j WHERE ${where}) x)`
  // One shape for the three tables' rows (the job id, then its other columns as one row's text), so they can be unioned.
  const queued = table(
    "queued_entries",
    "job_id, ROW(queue, tenant, priority, run_after, seq, deadline_at, touched_at, created_at, published_at)::text",
    "j.id, ROW(j.queue, j.tenant, j.priority, j.run_after, j.seq, j.deadline_at, greatest(j.updated_at, j.republished_at), j.created_at, j.published_at)::text",
    "j.state = 'queued'"
  )
  const leases = table(
    "lease_entries",
    "job_id, ROW(queue, lease_until, seq)::text",
    "j.id, ROW(j.queue, j.lease_until, j.seq)::text",
    "j.state = 'running'"
  )
  const finished = table(
    "finished_entries",
    "job_id, ROW(queue, state, created_at, seq, error_class, input_hash, failed_at)::text",
    "j.id, ROW(j.queue, j.state, j.created_at, j.seq, j.error_class, j.input_hash, j.failed_at)::text",
    "j.state IN ('succeeded', 'failed', 'abandoned')"
  )
  return driver.query(`${queued} UNION ALL ${leases} UNION ALL ${finished}`)
}
