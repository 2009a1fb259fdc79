#!lua flags=no-writes
-- count: how many jobs of the queue a listing's filters select, up to a bound (Query.count).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant, state, type, error class, request key (each "-" or "+text"), up to, input hash ("-" or "+text").
-- Returns: min(the number of matching jobs, up to).
-- Index: as `list`: the jobs of one state (`x:s:<state>`, or `x:ts:<state>:<tenant>`; the running ones in the lease
--        set `x:l`), the five of them without a state, or the jobs of one request key (`x:k:<key>`). Filtered by
--        state and tenant only, the answer is the ZCARD of those sets, O(1) whatever the backlog (a tenant's running
--        jobs are counted by reading each running job's tenant); by type as well (and no other filter), it is the sum of the
--        queue's counts (`n`, see keys.ts) for the states asked, O(1) too, once the counts cover the queue (the
--        meta hash's `nc`); with an error class, a request key or an input hash, or a type before the counts cover
--        the queue, each record is checked as `list` checks it, and the walk stops at `up to` matches.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local state = optString(ARGV[2])
local jobType = optString(ARGV[3])
local errorClass = optString(ARGV[4])
local requestKey = optString(ARGV[5])
local upTo = math.max(0, math.floor(tonumber(ARGV[6])))
local inputHash = optString(ARGV[7])

local PAGE = 200

local states = { "queued", "running", "succeeded", "failed", "abandoned" }
if state ~= nil then
  states = { state }
end

local keys = {}
if requestKey ~= nil then
  keys[1] = base .. K.keyed .. enc(requestKey)
else
  for _, s in ipairs(states) do
    if s == "running" then
      keys[#keys + 1] = base .. K.lease
    elseif tenant ~= nil then
      keys[#keys + 1] = base .. K.tenantState .. s .. ":" .. enc(tenant)
    else
      keys[#keys + 1] = base .. K.state .. s
    end
  end
end

local count = 0
if jobType ~= nil and errorClass == nil and requestKey == nil and inputHash == nil
  and redis.call("HGET", KEYS[1], "nc") == "1" then
  local fields = {}
  for i, s in ipairs(states) do
    fields[i] = s .. ":" .. enc(jobType)
    if tenant ~= nil then
      fields[i] = fields[i] .. "t" .. enc(tenant)
    end
  end
  for _, n in ipairs(redis.call("HMGET", base .. K.counts, unpack(fields))) do
    count = count + (tonumber(n) or 0)
  end
  return math.min(count, upTo)
end
if jobType == nil and errorClass == nil and requestKey == nil and inputHash == nil then
  for _, key in ipairs(keys) do
    if key == base .. K.lease then
      count = count + runningCount(tenant)
    else
      count = count + redis.call("ZCARD", key)
    end
  end
  return math.min(count, upTo)
end

for _, key in ipairs(keys) do
  local rank = 0
  while count < upTo do
    local members = redis.call("ZRANGE", key, rank, rank + PAGE - 1)
    for _, member in ipairs(members) do
      local job = load(idOfMember(member))
      if job ~= nil and (jobType == nil or job.type == jobType) and (errorClass == nil or job.errorClass == errorClass)
        and (state == nil or job.state == state) and (tenant == nil or job.tenant == tenant)
        and (inputHash == nil or job.inputHash == inputHash) then
        count = count + 1
        if count >= upTo then
          return count
        end
      end
    end
    if #members < PAGE then
      break
    end
    rank = rank + PAGE
  end
end
return math.min(count, upTo)
