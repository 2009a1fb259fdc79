/**
 * A small seeded pseudo-random stream (mulberry32) for decisions the simulator makes outside Effect's `Random`:
 * which runnable task goes next, which derived seed a run gets. Same seed, same stream.
 *
 * @internal
 */
export const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }
}

/**
 * A 32-bit mix of two integers: derives the seed of run `i` of a run set from the set's seed.
 *
 * @internal
 */
export const mixSeed = (seed: number, i: number): number => {
  let h = (seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}
