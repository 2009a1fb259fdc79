-- batchJobs: a batch's items in the order they landed (BatchStore.jobs), those in one state only when given,
-- after an item, at most `limit`.
-- KEYS[1]: the meta hash of the batch's queue. ARGV: batch id, tenant filter ("-" = any, "+text"), state ("" =
-- any), after (job id, "" = from the first), limit.
-- Returns: { jobs... }.
-- @include base
-- @include protocol
-- @include records

local b = loadBatch(ARGV[1])
local tenant = optString(ARGV[2])
if b == nil or (tenant ~= nil and b.tenant ~= tenant) then
  return {}
end
local state = ARGV[3]
local limit = tonumber(ARGV[5])
local key = batchItemsKey(b.id)
local start = 0
if ARGV[4] ~= "" then
  -- A purged item stays in the list but is no job of the batch any more: nothing follows it, as after any id
  -- that is not one.
  local at = redis.call("LPOS", key, ARGV[4])
  if not at or redis.call("EXISTS", jobKey(ARGV[4])) == 0 then
    return {}
  end
  start = at + 1
end
local out = {}
local PAGE = 200
while #out < limit do
  local ids = redis.call("LRANGE", key, start, start + PAGE - 1)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local job = load(id)
    if job ~= nil and (state == "" or job.state == state) then
      out[#out + 1] = jobReply(job)
      if #out >= limit then
        break
      end
    end
  end
  start = start + PAGE
end
return out
