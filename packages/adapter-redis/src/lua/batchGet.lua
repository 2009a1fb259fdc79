-- batchGet: read a batch (BatchStore.get).
-- KEYS[1]: the meta hash of the batch's queue. ARGV: batch id.
-- Returns: the batch, or false.
-- @include base
-- @include protocol
-- @include records

local b = loadBatch(ARGV[1])
if b == nil then
  return false
end
return batchReply(b)
