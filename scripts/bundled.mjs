// Runs a TypeScript entry of this repository from a bundle of its workspace code (scripts/bundle.mjs), built on the
// spot or taken from the cache.
//
//   node [node flags] scripts/bundled.mjs <entry.ts> [arguments...]
//
// The entry sees `process.argv` as if it had been started directly, with the same arguments. Why: `tsx` compiles
// with esbuild's keepNames, which wraps every named function (including the closures made per call) in a property
// definition. For the simulator that costs a measurable share of every run (see the simulator README's Speed
// section), so the commands that run many simulations (simulate, bench:sim, the mutant hunts) start from this bundle
// instead.
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { bundleOf } from "./bundle.mjs"

const [entryArg, ...rest] = process.argv.slice(2)
if (entryArg === undefined) {
  console.error("usage: node scripts/bundled.mjs <entry.ts> [arguments...]")
  process.exit(2)
}
const entry = path.resolve(entryArg)
if (!fs.existsSync(entry)) {
  console.error(`bundled: no such entry: ${entry}`)
  process.exit(2)
}
let file
try {
  file = await bundleOf(entry)
} catch (error) {
  console.error(`bundled: ${error.message}`)
  process.exit(2)
}
process.setSourceMapsEnabled(true)
process.argv = [process.argv[0], file, ...rest]
await import(pathToFileURL(file).href)
