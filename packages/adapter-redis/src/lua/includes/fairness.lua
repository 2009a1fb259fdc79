-- fairness: the fair claim order (`@slowcall/core/Fairness`): each tenant's attained service decayed to now, and
-- the fair-claim indexes of a queue built once from its queued jobs. Needs base and records.
--
-- Tenant codes: "n" for jobs with no tenant, "t" followed by the tenant otherwise (as in `x:ft` and `fs`).

-- Fairness.decayFactors, the same doubles (a test compares this line with them).
local FAIR_DECAY = { 1, 0.9576032806985737, 0.9170040432046712, 0.8781260801866497, 0.8408964152537146, 0.8052451659746271, 0.7711054127039705, 0.7384130729697497, 0.7071067811865475, 0.6771277734684463, 0.6484197773255048, 0.620928906036742, 0.5946035575013605, 0.5693943173783458, 0.5452538663326288, 0.5221368912137069 }
local FAIR_STEPS = 16
local FAIR_FORGET_AFTER = 60

-- Fairness.decayed of a `fs` cell ("<service>|<at>", or false for none) at `now`, decay step `step`: the same
-- operations in the same order.
local function fairDecayed(cell, now, step)
  if not cell then
    return 0
  end
  local bar = string.find(cell, "|", 1, true)
  local service = tonumber(string.sub(cell, 1, bar - 1))
  local at = tonumber(string.sub(cell, bar + 1))
  local d = math.max(0, math.floor(now / step) - math.floor(at / step))
  local q = math.floor(d / FAIR_STEPS)
  if q >= FAIR_FORGET_AFTER then
    return 0
  end
  return service * FAIR_DECAY[d - q * FAIR_STEPS + 1] * 2 ^ (-q)
end

-- The tenant of a code (nil for "n").
local function tenantOfCode(code)
  if code == "n" then
    return nil
  end
  return string.sub(code, 2)
end

-- Makes the queue keep the fair-claim indexes: on its first fair claim, every queued job joins them (one pass over
-- `x:s:queued`), and the `fx` mark makes every later write keep them (records.lua).
local function ensureFairIndexes()
  if fairIndexed() then
    return
  end
  local members = redis.call("ZRANGE", base .. K.state .. "queued", 0, -1)
  for _, member in ipairs(members) do
    local id = idOfMember(member)
    local f = redis.call("HMGET", jobKey(id), "tn", "pr", "ra")
    if f[1] then
      redis.call("SADD", base .. K.fairTenants, "t" .. f[1])
    else
      local p = fmt(tonumber(f[2]))
      redis.call("SADD", base .. K.fairTenants, "n")
      redis.call("ZADD", base .. K.noTenantReady .. p, tonumber(f[3]), member)
      redis.call("ZADD", base .. K.noTenantPrios, tonumber(f[2]), p)
    end
  end
  redis.call("HSET", KEYS[1], "fx", "1")
  fairKept = true
end
