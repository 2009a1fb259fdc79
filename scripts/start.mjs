// `npm start`: the demo service on embedded PGlite (./.slowcall/), dashboard in the browser. Installs from the lock
// first when node_modules is missing or stale (scripts/ensure-installed.mjs), so it works as the first command on a
// fresh clone. Arguments after `--` go to `slowcall serve --demo`.
//
// The server runs in this process, from the command's bundle (scripts/cli-bundle.mjs: built on the first run and
// after a source changes, reused otherwise), so there is no child to outlive it: SIGINT, SIGTERM or SIGHUP sent to
// this pid stop the server gracefully (the worker hands back its leases, the data directory is unlocked) and free the
// port, and the exit status is the server's.
import { ensureInstalled } from "./ensure-installed.mjs"

ensureInstalled()
// Imported only now: the bundle script needs esbuild, which the install above provides on a fresh clone.
const { runCli } = await import("./cli-bundle.mjs")
await runCli(["serve", "--demo", ...process.argv.slice(2)])
