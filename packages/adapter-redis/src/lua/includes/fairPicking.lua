-- fairPicking: claimNext with `fair` (Store.claimNext, `@slowcall/core/Fairness`), shared by claimNextFair and
-- cycle: ARGV[at..] = max, owner, lease ms, default weight, decay step ms (Fairness.stepMs), the number of named
-- weights n, then n pairs (tenant, weight), then the filter as in claimNext; each claim's result appended to `out`
-- in pick order. Picks (Fairness.pick): for each tenant code in `x:ft`, its first `max` due runnable jobs in claim
-- order (its priorities highest first from `x:tp:`/`x:np`, in each by runAfter then insertion from
-- `x:tr:`/`x:nr:`); the k-th (from 0) keyed `decayed + k / weight`; the `max` smallest keys, equal keys in claim
-- order. Each tenant with n picks gets service `decayed + n / weight` at now in `fs`. The first fair claim of a
-- queue builds its fair indexes from its queued jobs (fairness.lua). Reads the ready indexes: any index writes
-- gathered before it must have been sent. Needs base, protocol, records, claiming, fairness and picking.

local function claimNextFairItems(now, retentionMs, at, out)
  local max = math.floor(tonumber(ARGV[at]))
  local owner = ARGV[at + 1]
  local leaseMs = tonumber(ARGV[at + 2])
  local defaultWeight = tonumber(ARGV[at + 3])
  local step = tonumber(ARGV[at + 4])
  local named = tonumber(ARGV[at + 5])
  local weights = {}
  for i = 1, named do
    weights[ARGV[at + 4 + 2 * i]] = tonumber(ARGV[at + 5 + 2 * i])
  end
  local runnable = runnableFrom(at + 6 + 2 * named)

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
            if k < max and runsUnder(runnable, id) then
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
end
