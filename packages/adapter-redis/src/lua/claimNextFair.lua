-- claimNextFair: claimNext with `fair` (Store.claimNext, `@slowcall/core/Fairness`): up to `max` due queued jobs
-- picked across tenants by least decayed service per weight, and each picked tenant's new service.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), max, owner, lease ms, default weight, decay step ms
--       (Fairness.stepMs), the number of named weights n, then n pairs (tenant, weight), then the
--       `Protocol.runnableBy` filter as in claimNext: "-" (none), or "+" followed by one "type@version" per argument.
-- Returns: { now, results... } as claimNext, in pick order.
-- Picks (Fairness.pick): for each tenant code in `x:ft`, its first `max` due runnable jobs in claim order (its
--        priorities highest first from `x:tp:`/`x:np`, in each by runAfter then insertion from `x:tr:`/`x:nr:`); the
--        k-th (from 0) keyed `decayed + k / weight`; the `max` smallest keys, equal keys in claim order. Each tenant
--        with n picks gets service `decayed + n / weight` at now in `fs`. The first fair claim of a queue builds its
--        fair indexes from its queued jobs (fairness.lua).
-- Atomic: the picks, the claims and the service writes happen in one script.
-- @include base
-- @include protocol
-- @include records
-- @include claiming
-- @include fairness
-- @include picking
-- @include fairPicking

deferIndexes()
local now = storeNow(ARGV[1])
local out = { fmt(now) }
claimNextFairItems(now, optNumber(ARGV[2]), 3, out)
publishWrites()
return out
