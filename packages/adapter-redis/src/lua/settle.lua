-- settle: end attempts under their tokens (Store.settle): complete, retry, fail, abandon, release or throttle.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), then 8 values per item: job id, token, kind
--       (complete | retry | fail | abandon | release | throttle), result JSON (complete), delay ms (retry, throttle),
--       error class (opt),
--       error (opt), abandon reason (abandon; "" otherwise). Optional strings are "-" or "+text".
-- Returns: { now, results... }, each { "Settled", job } | { "LeaseLost", currentToken | false, state | false }. A
--          completed job's result is the one its item sent: the reply's result slot is then 1 (see jobReply).
-- Atomic: the fence, the record, the attempt row and the indexes change in one script.
-- @include base
-- @include protocol
-- @include records
-- @include fenced
-- @include settling

deferIndexes()
local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local out = { fmt(now) }
settleItems(now, retentionMs, 3, #ARGV, out)
publishWrites()
return out
