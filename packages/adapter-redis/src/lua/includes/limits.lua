-- limits: the Limiter's rules, a line-for-line version of `Limits.ts` in @slowcall/core (checked against it by
-- LimiterProperty): bucket refill, capacity, forgetting lapsed permits, the end of a pause (half-open), the
-- admission verdict, grant, release correction, renewal and pause merge. Every formula is evaluated in the order
-- Limits.ts writes it, so both sides compute the same doubles; numbers are stored as "%.17g" text.
--
-- Keys: every key of the Limiter starts with the base of KEYS[1] (`<prefix>:{%limits}:all`), so all of them share
-- one hash tag and one Cluster slot (a queue's tag can never be `%limits`: keys.ts escapes `%` in queue names).
-- - `all`: the set of resources that have a record.
-- - `r:enc(resource)`: the state hash. Limits `mc` `rpm` `ipm` `opm` `bs` `smp` `ssh` (share's minPriority and
--   share); buckets `rl`/`ra`, `il`/`ia`, `ol`/`oa` (level and the time it was written; absent: no limit); the pause
--   `pk` `pu` `pr` `ps` (kind, until (absent: until resumed), reason, since); `ho` = "1" when half-open; the
--   learned concurrency cap `lc` and its successes `ls` (both absent: none); counters
--   `n.g` (grants), `n.wc` `n.wr` `n.wi` `n.wo` `n.wp` (waits by reason), `n.pa` (Acquires answered Paused),
--   `n.prl` `n.pqe` `n.pma` (Pause items by kind).
-- - `p:enc(resource)`: permits by name (enc(callId) .. enc(jobId) .. token) as JSON text whose numbers are "%.17g"
--   strings (cjson would round them): c, j, t, n (tenant, absent for none), pr, u (until), pb ("1": probe), q, i, o
--   (taken per dimension).
-- - `e:enc(resource)`: the same permit names scored by their end, for the live count and forgetting.

local LB = string.sub(KEYS[1], 1, #KEYS[1] - #LK.all)

local function fmt(x)
  return string.format("%.17g", x)
end

-- Store time: the caller's override (tests), else the server's clock in whole epoch ms, as in includes/base.lua
-- (whole, so the permit ends in `e:` are integral scores).
local function storeNow(arg)
  if arg ~= nil and arg ~= "" then
    return tonumber(arg)
  end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function enc(s)
  return #s .. ":" .. s
end

local function stateKey(resource)
  return LB .. LK.state .. enc(resource)
end

local function permitsKey(resource)
  return LB .. LK.permits .. enc(resource)
end

local function endsKey(resource)
  return LB .. LK.ends .. enc(resource)
end

local function num(s)
  if s == nil or s == false or s == "" then
    return nil
  end
  return tonumber(s)
end

-- The bucket dimensions in the order of `Limits.dimensions`, with their limit, level, time and taken fields.
local DIMS = {
  { name = "requests", limit = "rpm", level = "rl", at = "ra", taken = "q" },
  { name = "inputTokens", limit = "ipm", level = "il", at = "ia", taken = "i" },
  { name = "outputTokens", limit = "opm", level = "ol", at = "oa", taken = "o" }
}

local WAIT_COUNTER = {
  concurrency = "n.wc",
  requests = "n.wr",
  inputTokens = "n.wi",
  outputTokens = "n.wo",
  probe = "n.wp"
}

local PAUSE_COUNTER = { rate_limited = "n.prl", quota_exhausted = "n.pqe", manual = "n.pma" }

-- A resource's stored state, as read at the start of an item.
local function loadLimit(resource)
  local raw = redis.call("HGETALL", stateKey(resource))
  local h = {}
  for i = 1, #raw, 2 do
    h[raw[i]] = raw[i + 1]
  end
  local s = {
    resource = resource,
    limits = {
      mc = num(h.mc),
      rpm = num(h.rpm),
      ipm = num(h.ipm),
      opm = num(h.opm),
      bs = num(h.bs),
      smp = num(h.smp),
      ssh = num(h.ssh)
    },
    buckets = {},
    pause = nil,
    halfOpen = h.ho == "1",
    learned = nil
  }
  if h.lc ~= nil then
    s.learned = { cap = tonumber(h.lc), successes = num(h.ls) or 0 }
  end
  for _, d in ipairs(DIMS) do
    if h[d.level] ~= nil then
      s.buckets[d.name] = { level = tonumber(h[d.level]), at = tonumber(h[d.at]) }
    end
  end
  if h.pk ~= nil then
    s.pause = { kind = h.pk, untilAt = num(h.pu), reason = h.pr or "", since = tonumber(h.ps) }
  end
  return s
end

-- Limits.capacity
local function capacity(limits, limit)
  local burst = limits.bs
  if burst == nil then
    burst = LIMIT_BURST_SECONDS
  end
  return math.max(1, (limit * burst) / 60)
end

-- Limits.levelAt
local function levelAt(bucket, limit, cap, now)
  if now <= bucket.at then
    return bucket.level
  end
  return math.min(cap, bucket.level + (now - bucket.at) * (limit / 60000))
end

local function writeBucket(s, d, bucket)
  s.buckets[d.name] = bucket
  redis.call("HSET", stateKey(s.resource), d.level, fmt(bucket.level), d.at, fmt(bucket.at))
end

-- Limits.inForce
local function inForce(pause, now)
  return pause.untilAt == nil or pause.untilAt > now
end

-- Limits.advance: a pause whose end has come is over and leaves the resource half-open; permits forgotten
-- `LIMIT_RETENTION_MS` after their end are dropped. Written at once (every item persists it).
local function advance(s, now)
  if s.pause ~= nil and not inForce(s.pause, now) then
    s.pause = nil
    s.halfOpen = true
    redis.call("HDEL", stateKey(s.resource), "pk", "pu", "pr", "ps")
    redis.call("HSET", stateKey(s.resource), "ho", "1")
  end
  local forgotten = redis.call("ZRANGEBYSCORE", endsKey(s.resource), "-inf", "(" .. fmt(now - LIMIT_RETENTION_MS))
  if #forgotten > 0 then
    redis.call("HDEL", permitsKey(s.resource), unpack(forgotten))
    redis.call("ZREM", endsKey(s.resource), unpack(forgotten))
  end
end

local function permitName(callId, jobId, token)
  return enc(callId) .. enc(jobId) .. token
end

local function loadPermit(s, name)
  local raw = redis.call("HGET", permitsKey(s.resource), name)
  if not raw then
    return nil
  end
  local p = cjson.decode(raw)
  p.u = tonumber(p.u)
  p.q = tonumber(p.q)
  p.i = tonumber(p.i)
  p.o = tonumber(p.o)
  return p
end

local function storePermit(s, name, p)
  local out = { c = p.c, j = p.j, t = p.t, pr = p.pr, u = fmt(p.u), pb = p.pb, q = fmt(p.q), i = fmt(p.i), o = fmt(p.o) }
  if p.n ~= nil then
    out.n = p.n
  end
  redis.call("HSET", permitsKey(s.resource), name, cjson.encode(out))
  redis.call("ZADD", endsKey(s.resource), fmt(p.u), name)
end

local function dropPermit(s, name)
  redis.call("HDEL", permitsKey(s.resource), name)
  redis.call("ZREM", endsKey(s.resource), name)
end

local function count(s, field)
  redis.call("HINCRBY", stateKey(s.resource), field, 1)
end

-- Limits.concurrencyCap: the declared cap, or the learned one when lower (nil: neither).
local function concurrencyCap(s)
  if s.learned == nil then
    return s.limits.mc
  end
  if s.limits.mc == nil then
    return s.learned.cap
  end
  return math.min(s.limits.mc, s.learned.cap)
end

-- Limits.learn: what a Release that reached the provider teaches the concurrency cap (`others`: live permits
-- besides the released one). Returns the new learned state or nil.
local function learn(s, reached, rateLimited, others)
  if not reached then
    return s.learned
  end
  local declared = s.limits.mc
  local function below(nextLearned)
    if declared ~= nil and nextLearned.cap >= declared then
      return nil
    end
    return nextLearned
  end
  if rateLimited then
    local cap = concurrencyCap(s)
    if cap == nil then
      return below({ cap = math.max(1, others), successes = 0 })
    end
    return below({ cap = math.max(1, math.min(cap, others)), successes = 0 })
  end
  if s.learned == nil or others + 1 < s.learned.cap then
    return s.learned
  end
  local successes = s.learned.successes + 1
  if successes >= LIMIT_RAISE_AFTER * s.learned.cap then
    return below({ cap = s.learned.cap + 1, successes = 0 })
  end
  return { cap = s.learned.cap, successes = successes }
end

local function writeLearned(s, learned)
  s.learned = learned
  if learned == nil then
    redis.call("HDEL", stateKey(s.resource), "lc", "ls")
  else
    redis.call("HSET", stateKey(s.resource), "lc", fmt(learned.cap), "ls", fmt(learned.successes))
  end
end

-- Limits.admission on an advanced state: { "Paused" } | { "Wait", reason, until } | { "Grant", probe }.
local function admission(s, priority, cost, now)
  if s.pause ~= nil and inForce(s.pause, now) then
    return { "Paused" }
  end
  local live = nil
  local cap = concurrencyCap(s)
  if s.halfOpen or cap ~= nil then
    live = redis.call("ZRANGEBYSCORE", endsKey(s.resource), fmt(now), "+inf", "WITHSCORES")
  end
  if s.halfOpen then
    local probeUntil = nil
    for k = 1, #live, 2 do
      local p = loadPermit(s, live[k])
      if p ~= nil and p.pb == "1" then
        if probeUntil == nil then
          probeUntil = p.u
        end
        probeUntil = math.max(probeUntil, p.u)
      end
    end
    if probeUntil ~= nil then
      return { "Wait", "probe", probeUntil }
    end
  end
  local limits = s.limits
  local reserved = 0
  if limits.smp ~= nil and priority < limits.smp then
    reserved = limits.ssh
  end
  local reason = nil
  local untilAt = -math.huge
  if cap ~= nil then
    local allowed = cap - math.floor(cap * reserved)
    local liveCount = #live / 2
    if liveCount >= allowed then
      reason = "concurrency"
      local earliest = math.huge
      for k = 2, #live, 2 do
        earliest = math.min(earliest, tonumber(live[k]))
      end
      untilAt = math.max(untilAt, earliest)
    end
  end
  for _, d in ipairs(DIMS) do
    local bucket = s.buckets[d.name]
    local limit = limits[d.limit]
    local c = cost[d.name]
    if bucket ~= nil and limit ~= nil and c > 0 then
      local cap = capacity(limits, limit)
      local reserve = cap * reserved
      local usable = levelAt(bucket, limit, cap, now) - reserve
      local need = math.min(c, cap - reserve)
      if usable < need then
        if reason == nil then
          reason = d.name
        end
        untilAt = math.max(untilAt, now + (need - usable) / (limit / 60000))
      end
    end
  end
  if reason == nil then
    return { "Grant", s.halfOpen }
  end
  return { "Wait", reason, untilAt }
end

-- Limits.mergePause
local function mergePause(current, nextPause)
  if current == nil then
    return nextPause
  end
  local function endOf(p)
    if p.untilAt == nil then
      return math.huge
    end
    return p.untilAt
  end
  local function rank(kind)
    if kind == "rate_limited" then
      return 0
    end
    return 1
  end
  if endOf(nextPause) ~= endOf(current) then
    if endOf(nextPause) > endOf(current) then
      return nextPause
    end
    return current
  end
  if rank(nextPause.kind) >= rank(current.kind) then
    return nextPause
  end
  return current
end

local function writePause(s, pause)
  s.pause = pause
  local key = stateKey(s.resource)
  redis.call("HSET", key, "pk", pause.kind, "pr", pause.reason, "ps", fmt(pause.since))
  if pause.untilAt == nil then
    redis.call("HDEL", key, "pu")
  else
    redis.call("HSET", key, "pu", fmt(pause.untilAt))
  end
end

-- The reply snapshot of a resource after an item: its state hash (flat) and its live permit count at `now`.
local function snapshot(s, now)
  return {
    redis.call("HGETALL", stateKey(s.resource)),
    tostring(redis.call("ZCOUNT", endsKey(s.resource), fmt(now), "+inf"))
  }
end

local function touch(resource)
  redis.call("SADD", KEYS[1], resource)
end
