#!lua flags=no-writes
-- list: a filtered listing of the queue (Query.list).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant, state, type, error class (each "-" or "+text"), limit ("" = all), order ("newest" | "oldest").
-- Returns: the matching jobs in createdAt order, insertion order breaking ties, at most limit.
-- Index: the narrowest of `x:ts:<state>:<tenant>`, `x:t:<tenant>`, `x:s:<state>` and `x:all` (all by createdAt);
--        type and error class are checked on each record walked.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local state = optString(ARGV[2])
local jobType = optString(ARGV[3])
local errorClass = optString(ARGV[4])
local limit = optNumber(ARGV[5])
local newest = ARGV[6] ~= "oldest"

local key = base .. K.all
if tenant ~= nil and state ~= nil then
  key = base .. K.tenantState .. state .. ":" .. enc(tenant)
elseif tenant ~= nil then
  key = base .. K.tenant .. enc(tenant)
elseif state ~= nil then
  key = base .. K.state .. state
end

local out = {}
if limit ~= nil and limit <= 0 then
  return out
end
local PAGE = 200
local start = 0
while true do
  local members
  if newest then
    members = redis.call("ZREVRANGE", key, start, start + PAGE - 1)
  else
    members = redis.call("ZRANGE", key, start, start + PAGE - 1)
  end
  for _, member in ipairs(members) do
    local job = load(idOfMember(member))
    if job ~= nil and (jobType == nil or job.type == jobType) and (errorClass == nil or job.errorClass == errorClass) then
      out[#out + 1] = jobReply(job)
      if limit ~= nil and #out >= limit then
        return out
      end
    end
  end
  if #members < PAGE then
    return out
  end
  start = start + PAGE
end
