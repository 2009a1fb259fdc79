#!lua flags=no-writes
-- deadLetters: failed jobs and their groups (Query.deadLetters).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant, error class, type (each "-" or "+text"), limit.
-- Returns: { jobs, groups }: the matching failed jobs most recently updated first (`x:dl` or `x:tdl:<tenant>`,
--          by updatedAt; ties newest insertion first), at most limit; and the groups of the matching failed jobs,
--          each { field, "count|cost", { member, failedAt, member, failedAt, ... } }: the sums from `g`, `g:t:`,
--          `g:y:` or `g:ty:` (fields are "c<class>:<input hash>" or "n:<input hash>"), filtered by error class,
--          and the group's first 50 entries (Query.groupJobIdsLimit) of its job index (`x:gj:`, `x:gjt:`, `x:gjy:`
--          or `x:gjty:`), most recently failed first, the later inserted first on equal times.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local errorClass = optString(ARGV[2])
local jobType = optString(ARGV[3])
local limit = tonumber(ARGV[4])

local jobsKey = base .. K.dead
if tenant ~= nil then
  jobsKey = base .. K.tenantDead .. enc(tenant)
end
local jobs = {}
local PAGE = 200
local start = 0
while limit > 0 and #jobs < limit do
  local members = redis.call("ZREVRANGE", jobsKey, start, start + PAGE - 1)
  for _, member in ipairs(members) do
    local job = load(idOfMember(member))
    if job ~= nil and (jobType == nil or job.type == jobType) and (errorClass == nil or job.errorClass == errorClass) then
      jobs[#jobs + 1] = jobReply(job)
      if #jobs >= limit then
        break
      end
    end
  end
  if #members < PAGE then
    break
  end
  start = start + PAGE
end

local groupsKey = base .. K.groups
local groupJobsKey = base .. K.groupJobs
if tenant ~= nil and jobType ~= nil then
  groupsKey = base .. K.tenantTypeGroups .. enc(tenant) .. enc(jobType)
  groupJobsKey = base .. K.tenantTypeGroupJobs .. enc(tenant) .. enc(jobType)
elseif tenant ~= nil then
  groupsKey = base .. K.tenantGroups .. enc(tenant)
  groupJobsKey = base .. K.tenantGroupJobs .. enc(tenant)
elseif jobType ~= nil then
  groupsKey = base .. K.typeGroups .. enc(jobType)
  groupJobsKey = base .. K.typeGroupJobs .. enc(jobType)
end
local raw = redis.call("HGETALL", groupsKey)
local groups = {}
local wanted = nil
if errorClass ~= nil then
  wanted = "c" .. errorClass .. ":"
end
for i = 1, #raw, 2 do
  if wanted == nil or string.sub(raw[i], 1, #wanted) == wanted then
    local recent = redis.call("ZREVRANGE", groupJobsKey .. raw[i], 0, 49, "WITHSCORES")
    groups[#groups + 1] = { raw[i], raw[i + 1], recent }
  end
end
return { jobs, groups }
