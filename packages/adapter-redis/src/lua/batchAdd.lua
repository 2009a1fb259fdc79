-- batchAdd: land a chunk of a batch's items at an offset (BatchStore.add): Batch.addVerdict, Batch.itemOf,
-- Protocol.newJob for the items not landed yet, Batch.appended.
-- KEYS[1]: the meta hash of the batch's queue; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), batch id, offset, then 15 values per item, as submit's.
-- Returns: { "constraint", id } when a new item's id exists already or repeats (nothing written); else
--          { now, "NotFound" } | { now, "Cancelled" | "Misplaced", batch } |
--          { now, "Added", batch, { jobs... }, { ids of the chunk's items that had landed already } }.
-- Atomic: the verdict, the items and the batch's counts are one script.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local b = loadBatch(ARGV[2])
if b == nil then
  return { fmt(now), "NotFound" }
end
local offset = tonumber(ARGV[3])
local count = (#ARGV - 3) / ITEM_ARITY
if b.cancelRequestedAt ~= nil then
  return { fmt(now), "Cancelled", batchReply(b) }
end
if offset ~= math.floor(offset) or offset < 0 or offset > b.added or offset + count > b.size then
  return { fmt(now), "Misplaced", batchReply(b) }
end
local skip = math.min(count, b.added - offset)

local items = {}
local seen = {}
for i = skip, count - 1 do
  local a = 3 + i * ITEM_ARITY
  -- Batch.itemOf: the batch's tenant, no request key, a deadline no later than the batch's.
  local item = readItem(a)
  item.tenant = b.tenant
  item.requestKey = nil
  if item.deadlineAt == nil then
    item.deadlineAt = b.deadlineAt
  elseif b.deadlineAt ~= nil then
    item.deadlineAt = math.min(item.deadlineAt, b.deadlineAt)
  end
  if seen[item.id] or redis.call("EXISTS", jobKey(item.id)) == 1 then
    return { "constraint", item.id }
  end
  seen[item.id] = true
  items[#items + 1] = item
end

local jobs = {}
for _, item in ipairs(items) do
  local seq = redis.call("HINCRBY", KEYS[1], "seq", 1)
  local job = newJob(item, now, seq)
  job.batchId = b.id
  save(nil, job)
  redis.call("HSET", dataKey(job.id), "i", item.input)
  redis.call("RPUSH", batchItemsKey(b.id), job.id)
  touched(job)
  jobs[#jobs + 1] = jobReply(job)
end
if #items > 0 then
  b.added = b.added + #items
  b.queued = b.queued + #items
  b.updatedAt = bump(b.updatedAt, now)
  storeBatch(b)
end
local landed = {}
if skip > 0 then
  landed = redis.call("LRANGE", batchItemsKey(b.id), offset, offset + skip - 1)
end
publishWrites()
return { fmt(now), "Added", batchReply(b), jobs, landed }
