/**
 * The Effect-operation counter `bench/worker-overhead.ts` and `bench/submit-overhead.ts` report with `COUNT=1`: the
 * simulator's, so that the benches and `npm run bench:sim -- --count-ops` count the same way.
 */
export { OpCount, watch } from "@slowcall/simulator/OpCount"
