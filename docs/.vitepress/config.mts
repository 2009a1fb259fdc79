import { fileURLToPath } from "node:url"
import { defineConfig } from "vitepress"
import { referenceModules } from "./reference.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))

const referenceSidebar = () => {
  const byPackage = new Map<string, Array<{ text: string; link: string }>>()
  for (const m of referenceModules()) {
    const items = byPackage.get(m.packageName) ?? []
    items.push({ text: m.module, link: `/reference/${m.slug}` })
    byPackage.set(m.packageName, items)
  }
  return [
    { text: "Overview", link: "/reference/" },
    ...[...byPackage].map(([text, items]) => ({ text, collapsed: true, items }))
  ]
}

export default defineConfig({
  title: "slowcall",
  description:
    "Slow, billed AI calls as durable background jobs: claim before call, fencing, spend budgets, normalised errors, safe replay.",
  lang: "en",
  head: [["link", { rel: "icon", type: "image/svg+xml", href: "/favicon.svg" }]],
  ignoreDeadLinks: false,
  lastUpdated: false,
  themeConfig: {
    nav: [
      { text: "Guide", link: "/guide/when-to-queue" },
      { text: "Calculator", link: "/guide/calculator" },
      { text: "Adapters", link: "/adapters/" },
      { text: "Reference", link: "/reference/" }
    ],
    sidebar: {
      "/reference/": referenceSidebar(),
      "/": [
        {
          text: "Deciding",
          items: [
            { text: "When to put a slow call on a queue", link: "/guide/when-to-queue" },
            { text: "Calculator", link: "/guide/calculator" },
            { text: "slowcall advise", link: "/guide/advise" }
          ]
        },
        {
          text: "How jobs run",
          items: [
            { text: "Getting started", link: "/guide/getting-started" },
            { text: "Promise API (async/await)", link: "/guide/promise" },
            { text: "Architecture: the seam", link: "/guide/architecture" },
            { text: "The job state machine", link: "/guide/state-machine" },
            { text: "Claim before call: leases and fencing", link: "/guide/leases" },
            { text: "Spend accounting and budgets", link: "/guide/spend" },
            { text: "Staying within provider limits", link: "/guide/provider-limits" },
            { text: "Error classes and retries", link: "/guide/errors" },
            { text: "Provider SDKs: billed calls and prices", link: "/guide/providers" },
            { text: "Provider cases", link: "/guide/provider-cases" },
            { text: "Dead letters and replay", link: "/guide/dead-letters" },
            { text: "Batches", link: "/guide/batches" },
            { text: "Delivering results", link: "/guide/delivery" },
            { text: "Cancellation", link: "/guide/cancellation" },
            { text: "Fair shares across tenants", link: "/guide/fairness" },
            { text: "Schedules", link: "/guide/schedules" }
          ]
        },
        {
          text: "Operating",
          items: [
            { text: "Choosing an adapter", link: "/adapters/" },
            { text: "In-memory adapter", link: "/adapters/memory" },
            { text: "Postgres adapter", link: "/adapters/postgres" },
            { text: "Redis adapter", link: "/adapters/redis" },
            { text: "SQS transport", link: "/adapters/sqs" },
            { text: "Serving the HTTP API safely", link: "/guide/http" },
            { text: "The dashboard", link: "/guide/dashboard" },
            { text: "Observability: traces and /metrics", link: "/guide/observability" },
            { text: "The slowcall command", link: "/guide/cli" },
            { text: "The simulator in your CI", link: "/guide/simulator" },
            { text: "Reliability and the chaos harness", link: "/guide/reliability" },
            { text: "Benchmarks", link: "/guide/benchmarks" },
            { text: "Package size", link: "/guide/package-size" },
            { text: "Packaging and releases", link: "/guide/packaging" },
            { text: "Examples", link: "/guide/examples" }
          ]
        },
        {
          text: "Recipes",
          items: [
            { text: "Express: submit and poll", link: "/guide/recipes/promise-express" },
            { text: "Route handler with SSE", link: "/guide/recipes/promise-route-handler-sse" },
            { text: "A batch script", link: "/guide/recipes/promise-batch" },
            { text: "OpenAI and Anthropic SDKs in a worker", link: "/guide/recipes/provider-sdks" }
          ]
        },
        { text: "API reference", link: "/reference/" }
      ]
    },
    search: { provider: "local" },
    outline: { level: [2, 3] }
  },
  vite: {
    server: { fs: { allow: [root] } }
  }
})
