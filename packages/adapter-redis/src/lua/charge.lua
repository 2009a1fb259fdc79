-- charge: record reservations and settlements in the ledger (Store.charge). Not fenced: the money was spent.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), then 5 values per item: job id, call id, token, amount cents, settled "1"/"0".
-- Returns: { now, results... }, each { "Charged", costCents } | { "NotFound" }
--          | { "BatchBudgetExceeded", costCents, batchId, batchCostCents, budgetCents }.
-- Atomic: the ledger row (keyed by call id) and the job's spend change in one script, so a call id counts
--         once however often it is sent and the spend is always the ledger's sum; a row of an attempt that
--         ended with an error class moves that class's cost sum in the same script. On an item of a batch,
--         Batch.chargeVerdict is decided in the same script against the batch as the earlier items left it: a
--         reservation of a new call id that the batch's budget cannot cover writes nothing.
-- @include base
-- @include protocol
-- @include records
-- @include charging

local now = storeNow(ARGV[1])
local out = { fmt(now) }
chargeItems(now, 2, #ARGV, out)
publishWrites()
return out
