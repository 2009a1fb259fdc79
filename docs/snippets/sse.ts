// Following a job with Server-Sent Events in the browser. EventSource reconnects by itself and sends the last
// event id it saw as Last-Event-ID, so the server resumes after it; the stream ends with the terminal state.
interface JobView {
  readonly state: "queued" | "running" | "succeeded" | "failed" | "abandoned"
  readonly progress: number
  readonly result: unknown
}

export function followJob(id: string, onChange: (job: JobView) => void): () => void {
  const source = new EventSource(`/v1/jobs/${id}/events`)
  source.addEventListener("job", (event) => {
    const job = JSON.parse((event as unknown as { readonly data: string }).data) as JobView
    onChange(job)
    if (job.state === "succeeded" || job.state === "failed" || job.state === "abandoned") source.close()
  })
  return () => source.close()
}
