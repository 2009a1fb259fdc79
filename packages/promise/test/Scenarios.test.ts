import { scenarios } from "./scenarios.js"

scenarios("memory", () => ({ url: "memory:" }))
scenarios("PGlite in memory", () => ({ url: "pglite:memory" }))
