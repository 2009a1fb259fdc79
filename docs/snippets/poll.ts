// A polling client for GET /v1/jobs/{id}: conditional requests with the ETag, and the server's Retry-After hint
// as the interval (it grows with the job's age, from 1 s up to 30 s).
interface JobView {
  readonly id: string
  readonly state: "queued" | "running" | "succeeded" | "failed" | "abandoned"
  readonly progress: number
  readonly result: unknown
  readonly errorClass: string | null
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const terminal = new Set(["succeeded", "failed", "abandoned"])

export async function waitForJob(baseUrl: string, id: string, onProgress: (job: JobView) => void): Promise<JobView> {
  let etag: string | null = null
  let job: JobView | undefined
  for (;;) {
    const response: Response = await fetch(`${baseUrl}/v1/jobs/${id}`, {
      headers: etag === null ? {} : { "if-none-match": etag }
    })
    if (response.status === 200) {
      etag = response.headers.get("etag")
      job = (await response.json()) as JobView
      onProgress(job)
      if (terminal.has(job.state)) return job
    } else if (response.status !== 304) {
      throw new Error(`GET /v1/jobs/${id}: HTTP ${response.status}`)
    }
    // 304: nothing changed since our ETag; wait as the server suggests.
    await sleep(Number(response.headers.get("retry-after") ?? "1") * 1000)
  }
}
