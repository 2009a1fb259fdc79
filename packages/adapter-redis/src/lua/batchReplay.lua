-- batchReplay: every failed item of a batch back to queued (BatchStore.replay): Protocol.replayTransition on each,
-- the item write moving the batch (Batch.afterItemWrite).
-- KEYS[1]: the meta hash of the batch's queue; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), batch id, tenant filter ("-" = any, "+text").
-- Returns: { now, "NotFound" } | { now, "Replayed", batch, { jobs } }.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local b = loadBatch(ARGV[2])
local tenant = optString(ARGV[3])
if b == nil or (tenant ~= nil and b.tenant ~= tenant) then
  return { fmt(now), "NotFound" }
end
local jobs = {}
for _, id in ipairs(redis.call("LRANGE", batchItemsKey(b.id), 0, -1)) do
  local job = load(id)
  if job ~= nil and job.state == "failed" then
    jobs[#jobs + 1] = jobReply(apply(job, now, replayTransition(job, now)))
  end
end
publishWrites()
return { fmt(now), "Replayed", batchReply(loadBatch(b.id)), jobs }
