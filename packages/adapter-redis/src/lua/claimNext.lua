-- claimNext: claim up to `max` jobs the store picks (Store.claimNext, in Protocol.claimNextOrder).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), max, owner, lease ms, then the `Protocol.runnableBy`
--       filter: "-" (none), or "+" followed by one "type@version" per argument (possibly none: nothing runnable).
-- Returns: { now, results... }, each { "Claimed", job, takeover "1"/"0" } | { "Settled", job } (a claim that
--          settled the job).
-- Picks: first the running jobs whose lease ended (`x:l`, score < now), oldest insertion first: taken over at once,
--        with no sweep in between. Then the priorities with queued jobs, highest first (`x:p`); in each, due jobs by
--        runAfter, then insertion order (`x:r:<priority>`, members carry the insertion counter). Every pick is
--        claimable, so each one is claimed or settled and counts toward max. With a filter, jobs of other
--        (type, version) pairs are passed over (queued ones read in pages of at least 64) and stay as they are.
-- Atomic: the picks and the claims happen in one script; no other claimer can take a picked job in between.
-- @include base
-- @include protocol
-- @include records
-- @include claiming
-- @include picking

deferIndexes()
local now = storeNow(ARGV[1])
local out = { fmt(now) }
claimNextItems(now, optNumber(ARGV[2]), 3, out)
publishWrites()
return out
