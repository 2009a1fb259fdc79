#!lua flags=no-writes
-- stats: counts and ages of the queue (Query.stats).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant ("-" or "+text"), failed-since ms, now ("" = server TIME).
-- Returns: { now, counts by state (queued, running, succeeded, failed, abandoned), { priority, oldest due
--          runAfter, ... }, { error class, "count|cost", ... }, failures since }.
-- Index: ZCARD of `x:s:<state>` (or per tenant); the first due member of `x:r:<priority>` for each priority
--        of `x:p`; the sums of `e`; ZCOUNT of `x:fa`. No record is read.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local failedSince = tonumber(ARGV[2])
local now = storeNow(ARGV[3])

local counts = {}
for i, state in ipairs({ "queued", "running", "succeeded", "failed", "abandoned" }) do
  local key = base .. K.state .. state
  if tenant ~= nil then
    key = base .. K.tenantState .. state .. ":" .. enc(tenant)
  end
  counts[i] = tostring(redis.call("ZCARD", key))
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
return { fmt(now), counts, oldest, costs, tostring(failures) }
