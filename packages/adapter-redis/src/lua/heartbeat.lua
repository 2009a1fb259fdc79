-- heartbeat: renew leases under their tokens (Store.heartbeat).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), then 4 values per item: job id, token, lease ms, progress ("" = unchanged).
-- Returns: { now, results... }, each { "Renewed", leaseUntil, cancelRequested "1"/"0", costCents } |
--          { "LeaseLost", currentToken | false, state | false }.
-- Atomic: the fence (running under exactly this token) and the write are one script.
-- @include base
-- @include protocol
-- @include records
-- @include fenced
-- @include renewing

deferIndexes()
local now = storeNow(ARGV[1])
local out = { fmt(now) }
renewItems(now, 2, #ARGV, out)
publishWrites()
return out
