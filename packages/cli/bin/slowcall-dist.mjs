#!/usr/bin/env node
// The `slowcall` executable of the published package: runs the build in dist/ (in the monorepo, bin/slowcall.mjs
// runs a bundle of the TypeScript source instead).
await import("../dist/bin.js")
