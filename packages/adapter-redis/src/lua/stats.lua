#!lua flags=no-writes
-- stats: counts and ages of the queue (Query.stats).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant ("-" or "+text"), failed-since ms, now ("" = server TIME), spend-since ms ("" = every row).
-- Returns: { now, counts by state (queued, running, succeeded, failed, abandoned), { priority, oldest due
--          runAfter, ... }, { error class, "count|cost", ... }, failures since, { version, type, due count,
--          oldest due runAfter, ... }, { tenant (false for none), type, state, cost, jobs, ... } }.
-- Index: ZCARD of `x:s:<state>` (or per tenant; the running jobs: `runningCount`); the first due member of
--        `x:r:<priority>` for each priority of `x:p`; the sums of `ea`; ZCOUNT of `x:fa`; per pair of `x:w`, the due count and first due member of
--        `x:wq:<pair>`; the ledger rows of `x:c` in the window, each read with its job's tenant, type and state
--        (the spend costs one read per row in the window).
-- Atomic: one script reads one instant of the queue.
-- @include base
-- @include records

local tenant = optString(ARGV[1])
local failedSince = tonumber(ARGV[2])
local now = storeNow(ARGV[3])
local spendSince = optNumber(ARGV[4])

local counts = {}
for i, state in ipairs({ "queued", "running", "succeeded", "failed", "abandoned" }) do
  if state == "running" then
    counts[i] = tostring(runningCount(tenant))
  else
    local key = base .. K.state .. state
    if tenant ~= nil then
      key = base .. K.tenantState .. state .. ":" .. enc(tenant)
    end
    counts[i] = tostring(redis.call("ZCARD", key))
  end
end

local oldest = {}
local priosKey = base .. K.prios
if tenant ~= nil then
  priosKey = base .. K.tenantPrios .. enc(tenant)
end
for _, p in ipairs(redis.call("ZRANGE", priosKey, 0, -1)) do
  local key = base .. K.ready .. p
  if tenant ~= nil then
    key = base .. K.tenantReady .. p .. ":" .. enc(tenant)
  end
  local first = redis.call("ZRANGEBYSCORE", key, "-inf", fmt(now), "WITHSCORES", "LIMIT", 0, 1)
  if #first > 0 then
    oldest[#oldest + 1] = p
    oldest[#oldest + 1] = first[2]
  end
end

local costsKey = base .. K.costs
local failedKey = base .. K.failed
if tenant ~= nil then
  costsKey = base .. K.tenantCosts .. enc(tenant)
  failedKey = base .. K.tenantFailed .. enc(tenant)
end
local costs = redis.call("HGETALL", costsKey)
local failures = redis.call("ZCOUNT", failedKey, fmt(failedSince), "+inf")

local waiting = {}
local typesKey = base .. K.waitingTypes
local waitingBase = base .. K.waiting
if tenant ~= nil then
  typesKey = base .. K.tenantWaitingTypes .. enc(tenant)
  waitingBase = base .. K.tenantWaiting .. enc(tenant)
end
for _, pair in ipairs(redis.call("SMEMBERS", typesKey)) do
  local key = waitingBase .. pair
  local due = redis.call("ZCOUNT", key, "-inf", fmt(now))
  if due > 0 then
    local first = redis.call("ZRANGEBYSCORE", key, "-inf", fmt(now), "WITHSCORES", "LIMIT", 0, 1)
    local colon = string.find(pair, ":", 1, true)
    waiting[#waiting + 1] = string.sub(pair, 1, colon - 1)
    waiting[#waiting + 1] = string.sub(pair, colon + 1)
    waiting[#waiting + 1] = tostring(due)
    waiting[#waiting + 1] = first[2]
  end
end

-- Spend: every ledger row in the window, summed per (tenant, type, state) of its job now.
local ledgerKey = base .. K.ledger
if tenant ~= nil then
  ledgerKey = base .. K.tenantLedger .. enc(tenant)
end
local from = "-inf"
if spendSince ~= nil then
  from = fmt(spendSince)
end
local groups = {}
local order = {}
local seen = {}
local rows = redis.call("ZRANGEBYSCORE", ledgerKey, from, "+inf")
for _, member in ipairs(rows) do
  local colon = string.find(member, ":", 1, true)
  local length = tonumber(string.sub(member, 1, colon - 1))
  local id = string.sub(member, colon + 1, colon + length)
  local callId = string.sub(member, colon + length + 1)
  local raw = redis.call("HGET", chargesKey(id), callId)
  local fields = redis.call("HMGET", jobKey(id), "tn", "ty", "st")
  if raw and fields[3] then
    local row = decodeCharge(callId, raw)
    local groupKey = cjson.encode({ fields[1] or cjson.null, fields[2], fields[3] })
    local group = groups[groupKey]
    if group == nil then
      group = { tenant = fields[1], type = fields[2], state = fields[3], cost = 0, jobs = 0 }
      groups[groupKey] = group
      order[#order + 1] = groupKey
    end
    group.cost = group.cost + row.amountCents
    if not seen[id] then
      seen[id] = true
      group.jobs = group.jobs + 1
    end
  end
end
local spend = {}
for _, groupKey in ipairs(order) do
  local group = groups[groupKey]
  spend[#spend + 1] = group.tenant or false
  spend[#spend + 1] = group.type
  spend[#spend + 1] = group.state
  spend[#spend + 1] = fmt(group.cost)
  spend[#spend + 1] = tostring(group.jobs)
end
return { fmt(now), counts, oldest, costs, tostring(failures), waiting, spend }
