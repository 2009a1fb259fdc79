#!/usr/bin/env node
// The `slowcall` executable of the published package: runs the build in dist/ (bin/slowcall.mjs runs the TypeScript
// source in the monorepo).
await import("../dist/bin.js")
