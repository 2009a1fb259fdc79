-- batchCancel: cancel a batch (BatchStore.cancel): Batch.cancelVerdict, Batch.cancelTransition, each item's
-- cancel (Protocol.cancelVerdict, Protocol.cancelTransition; the item write moves the batch), then Batch.finish.
-- KEYS[1]: the meta hash of the batch's queue; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), batch id, tenant filter ("-" = any, "+text").
-- Returns: { now, "NotFound" } | { now, "Unchanged" | "AlreadyFinished", batch } | { now, "Cancelled", batch, { jobs } }.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local b = loadBatch(ARGV[3])
local tenant = optString(ARGV[4])
if b == nil or (tenant ~= nil and b.tenant ~= tenant) then
  return { fmt(now), "NotFound" }
end
if b.finishedAt ~= nil then
  return { fmt(now), "AlreadyFinished", batchReply(b) }
end
if b.cancelRequestedAt ~= nil then
  return { fmt(now), "Unchanged", batchReply(b) }
end
b.size = b.added
b.cancelRequestedAt = now
b.updatedAt = bump(b.updatedAt, now)
storeBatch(b)
local jobs = {}
for _, id in ipairs(redis.call("LRANGE", batchItemsKey(b.id), 0, -1)) do
  local job = load(id)
  if job ~= nil then
    local verdict = cancelVerdict(job)
    if verdict == "Abandon" or verdict == "Request" then
      jobs[#jobs + 1] = jobReply(apply(job, now, cancelTransition(job, now, verdict), retentionMs))
    end
  end
end
b = loadBatch(b.id)
finishBatch(b, now)
storeBatch(b)
publishWrites()
return { fmt(now), "Cancelled", batchReply(b), jobs }
