-- batchOpen: open a batch (BatchStore.open): Batch.openVerdict when its request key names a batch of the queue
-- already, Batch.newBatch otherwise.
-- KEYS[1]: the meta hash of the queue of the batch's items; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), batch id, tenant (opt), request key (opt), fingerprint, size, budget (opt number),
--       deadline (opt number), onComplete (opt JSON), onSuccess (opt JSON), parent job id (opt). Optional strings
--       are "-" or "+text"; optional numbers are "" for null.
-- Returns: { "constraint", id } when the batch id exists already (nothing written); else
--          { now, "Created" | "Existing", batch } | { now, "KeyReused", existing batch id }.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local id = ARGV[2]
local tenant = optString(ARGV[3])
local requestKey = optString(ARGV[4])
local fingerprint = ARGV[5]
if redis.call("EXISTS", batchKey(id)) == 1 then
  return { "constraint", id }
end
local field = nil
if requestKey ~= nil then
  field = requestKeyField(tenant, requestKey)
  local holder = redis.call("HGET", base .. K.batchKeys, field)
  if holder then
    local existing = loadBatch(holder)
    if existing.fingerprint == fingerprint then
      return { fmt(now), "Existing", batchReply(existing) }
    end
    return { fmt(now), "KeyReused", holder }
  end
end
local b = {
  id = id,
  tenant = tenant,
  requestKey = requestKey,
  fingerprint = fingerprint,
  size = tonumber(ARGV[6]),
  added = 0,
  queued = 0,
  running = 0,
  succeeded = 0,
  failed = 0,
  abandoned = 0,
  costCents = 0,
  budgetCents = optNumber(ARGV[7]),
  deadlineAt = optNumber(ARGV[8]),
  onComplete = optString(ARGV[9]),
  onSuccess = optString(ARGV[10]),
  parentJobId = optString(ARGV[11]),
  createdAt = now,
  updatedAt = now
}
storeBatch(b)
if field ~= nil then
  redis.call("HSET", base .. K.batchKeys, field, id)
end
return { fmt(now), "Created", batchReply(b) }
