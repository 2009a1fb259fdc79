-- claim: claim named jobs (Store.claim).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms of finished jobs' data ("" = keep), then 4 values per item: job id,
--       owner, lease ms, estimate cents ("" = the fallback estimate).
-- Returns: { now, results... }, each { "Claimed", job, takeover "1"/"0" } | { "Busy", job, until } |
--          { "NotDue", job, until } | { "Settled", job } | { "NotFound" }.
-- Atomic: the verdict and the write happen in one script, so two claims of one job are serialised by the server
--         and at most one of them finds it claimable; items apply in order.
-- @include base
-- @include protocol
-- @include records
-- @include claiming

deferIndexes()
local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local out = { fmt(now) }
for a = 3, #ARGV, 4 do
  local job = load(ARGV[a])
  if job == nil then
    out[#out + 1] = { "NotFound" }
  else
    out[#out + 1] = claimRow(job, now, ARGV[a + 1], tonumber(ARGV[a + 2]), optNumber(ARGV[a + 3]), retentionMs)
  end
end
publishWrites()
return out
