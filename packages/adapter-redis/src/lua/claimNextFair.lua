-- claimNextFair: claimNext with `fair` (Store.claimNext, `@slowcall/core/Fairness`): up to `max` due queued jobs
-- picked across tenants by least decayed service per weight, and each picked tenant's new service.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), max, owner, lease ms, default weight, decay step ms
--       (Fairness.stepMs), the number of named weights n, then n pairs (tenant, weight), then the
--       `Protocol.runnableBy` filter as in claimNext: "-" (none), or "+" followed by one "type@version" per argument.
-- Returns: { now, results... } as claimNext, in pick order.
-- Picks (Fairness.pick): for each tenant code in `x:ft`, its first `max` due runnable jobs in claim order (its
--        priorities highest first from `x:tp:`/`x:np`, in each by runAfter then insertion from `x:tr:`/`x:nr:`); the
--        k-th (from 0) keyed `decayed + k / weight`; the `max` smallest keys, equal keys in claim order. Each tenant
--        with n picks gets service `decayed + n / weight` at now in `fs`. The first fair claim of a queue builds its
--        fair indexes from its queued jobs (fairness.lua).
-- Atomic: the picks, the claims and the service writes happen in one script.
-- @include base
-- @include protocol
-- @include records
-- @include claiming
-- @include fairness

deferIndexes()
local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local max = math.floor(tonumber(ARGV[3]))
local owner = ARGV[4]
local leaseMs = tonumber(ARGV[5])
local defaultWeight = tonumber(ARGV[6])
local step = tonumber(ARGV[7])
local named = tonumber(ARGV[8])
local weights = {}
for i = 1, named do
  weights[ARGV[7 + 2 * i]] = tonumber(ARGV[8 + 2 * i])
end
local filterAt = 9 + 2 * named
local runnable = nil
if ARGV[filterAt] == "+" then
  runnable = {}
  for i = filterAt + 1, #ARGV do
    runnable[ARGV[i]] = true
  end
end

-- Protocol.runnableBy, on the record's type and version fields.
local function runs(id)
  if runnable == nil then
    return true
  end
  local tv = redis.call("HMGET", jobKey(id), "ty", "v")
  return runnable[tostring(tv[1]) .. "@" .. tostring(tonumber(tv[2]))] == true
end

local candidates = {}
local flows = {}
if max > 0 and (runnable == nil or next(runnable) ~= nil) then
  ensureFairIndexes()
  for _, code in ipairs(redis.call("SMEMBERS", base .. K.fairTenants)) do
    local tenant = tenantOfCode(code)
    local prios, ready, suffix
    if tenant == nil then
      prios, ready, suffix = base .. K.noTenantPrios, base .. K.noTenantReady, ""
    else
      prios, ready, suffix = base .. K.tenantPrios .. enc(tenant), base .. K.tenantReady, ":" .. enc(tenant)
    end
    local w = defaultWeight
    if tenant ~= nil and weights[tenant] ~= nil then
      w = weights[tenant]
    end
    local d = fairDecayed(redis.call("HGET", base .. K.fairService, code), now, step)
    flows[code] = { d = d, w = w, picks = 0 }
    local k = 0
    for _, p in ipairs(redis.call("ZREVRANGE", prios, 0, -1)) do
      local offset = 0
      while k < max do
        local need = max - k
        local page = runnable == nil and need or math.max(need, 64)
        local rows = redis.call("ZRANGEBYSCORE", ready .. p .. suffix, "-inf", fmt(now), "WITHSCORES", "LIMIT", offset, page)
        for i = 1, #rows, 2 do
          local member = rows[i]
          local id = idOfMember(member)
          if k < max and runs(id) then
            candidates[#candidates + 1] = {
              key = d + k / w,
              priority = tonumber(p),
              runAfter = tonumber(rows[i + 1]),
              seq = tonumber(string.sub(member, 1, 12)),
              id = id,
              code = code
            }
            k = k + 1
          end
        end
        if #rows < 2 * page then
          break
        end
        offset = offset + page
      end
      if k >= max then
        break
      end
    end
  end
end

table.sort(candidates, function(a, b)
  if a.key ~= b.key then
    return a.key < b.key
  end
  if a.priority ~= b.priority then
    return a.priority > b.priority
  end
  if a.runAfter ~= b.runAfter then
    return a.runAfter < b.runAfter
  end
  return a.seq < b.seq
end)

local out = { fmt(now) }
for i = 1, math.min(max, #candidates) do
  local c = candidates[i]
  flows[c.code].picks = flows[c.code].picks + 1
  out[#out + 1] = claimRow(load(c.id), now, owner, leaseMs, nil, retentionMs)
end
for code, flow in pairs(flows) do
  if flow.picks > 0 then
    redis.call("HSET", base .. K.fairService, code, fmt(flow.d + flow.picks / flow.w) .. "|" .. fmt(now))
  end
end
publishWrites()
return out
