#!/usr/bin/env node
// The `slowcall` executable in the monorepo: runs a bundle of the TypeScript source (scripts/cli-bundle.mjs), built
// once and rebuilt whenever a source changes. The published package's executable is bin/slowcall-dist.mjs (the build
// in dist/).
import { runCli } from "../../../scripts/cli-bundle.mjs"

await runCli(process.argv.slice(2))
