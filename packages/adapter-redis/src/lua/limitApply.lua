-- limitApply: acquire, release, renew and pause items on resources (Limiter.apply, `Limits.applyItem`).
-- KEYS[1]: `<prefix>:{%limits}:all`; every other key is built from its prefix (the Limiter's one slot).
-- ARGV: now ("" = server TIME), then 11 values per item, the first its kind:
--   "A", resource, call id, job id, token, lease ms, priority, requests, input tokens, output tokens, tenant ("-" none,
--        "+" and the name otherwise): Acquire (the cost already defaulted by the caller);
--   "R", resource, call id, job id, token, reached "1"/"0", input usage, output usage ("" unknown), rate limited
--        "1"/"0", "", "": Release;
--   "N", resource, call id, job id, token, lease ms, "", "", "", "", "": Renew;
--   "P", resource, kind, until ("" until resumed), reason, "", "", "", "", "", "": Pause.
-- Returns: { now, results... }, each { tag, a, b, snapshot } where snapshot = { state hash (flat), live permits }:
--   { "Granted", permitUntil, probe "1"/"0" } | { "Wait", until, reason } | { "Paused", until | false, kind } |
--   { "Released" } | { "Renewed", permitUntil } | { "NotHeld" }.
-- Atomic: each item reads and writes its resource's keys inside one script; items run one after another.
-- @include limits

local now = storeNow(ARGV[1])
local out = { fmt(now) }
for a = 2, #ARGV, 11 do
  local kind = ARGV[a]
  local resource = ARGV[a + 1]
  touch(resource)
  local s = loadLimit(resource)
  advance(s, now)
  local reply
  if kind == "P" then
    local merged = mergePause(s.pause, { kind = ARGV[a + 2], untilAt = num(ARGV[a + 3]), reason = ARGV[a + 4], since = now })
    writePause(s, merged)
    s.halfOpen = false
    redis.call("HDEL", stateKey(resource), "ho")
    count(s, PAUSE_COUNTER[ARGV[a + 2]])
    local untilAt = false
    if merged.untilAt ~= nil then
      untilAt = fmt(merged.untilAt)
    end
    reply = { "Paused", untilAt, merged.kind }
  else
    local name = permitName(ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
    local held = loadPermit(s, name)
    if kind == "A" then
      if held ~= nil then
        reply = { "Granted", fmt(held.u), held.pb }
      else
        local priority = tonumber(ARGV[a + 6])
        local cost = { requests = tonumber(ARGV[a + 7]), inputTokens = tonumber(ARGV[a + 8]), outputTokens = tonumber(ARGV[a + 9]) }
        local verdict = admission(s, priority, cost, now)
        if verdict[1] == "Paused" then
          count(s, "n.pa")
          local untilAt = false
          if s.pause.untilAt ~= nil then
            untilAt = fmt(s.pause.untilAt)
          end
          reply = { "Paused", untilAt, s.pause.kind }
        elseif verdict[1] == "Wait" then
          count(s, WAIT_COUNTER[verdict[2]])
          reply = { "Wait", fmt(verdict[3]), verdict[2] }
        else
          local permit = { c = ARGV[a + 2], j = ARGV[a + 3], t = ARGV[a + 4], pr = ARGV[a + 6], u = now + tonumber(ARGV[a + 5]), pb = "0" }
          if verdict[2] then
            permit.pb = "1"
          end
          if ARGV[a + 10] ~= "-" then
            permit.n = string.sub(ARGV[a + 10], 2)
          end
          for _, d in ipairs(DIMS) do
            local bucket = s.buckets[d.name]
            local limit = s.limits[d.limit]
            permit[d.taken] = 0
            if bucket ~= nil and limit ~= nil then
              permit[d.taken] = cost[d.name]
              local cap = capacity(s.limits, limit)
              writeBucket(s, d, { level = levelAt(bucket, limit, cap, now) - cost[d.name], at = math.max(bucket.at, now) })
            end
          end
          storePermit(s, name, permit)
          count(s, "n.g")
          reply = { "Granted", fmt(permit.u), permit.pb }
        end
      end
    elseif kind == "R" then
      if held == nil then
        reply = { "NotHeld" }
      else
        local reached = ARGV[a + 5] == "1"
        local usage = { inputTokens = num(ARGV[a + 6]), outputTokens = num(ARGV[a + 7]) }
        for _, d in ipairs(DIMS) do
          local bucket = s.buckets[d.name]
          local limit = s.limits[d.limit]
          if bucket ~= nil and limit ~= nil then
            -- Limits.giveBack
            local give
            if not reached then
              give = held[d.taken]
            elseif d.name == "requests" then
              give = 0
            elseif usage[d.name] == nil then
              give = 0
            else
              give = held[d.taken] - usage[d.name]
            end
            local cap = capacity(s.limits, limit)
            writeBucket(s, d, { level = math.min(cap, levelAt(bucket, limit, cap, now) + give), at = math.max(bucket.at, now) })
          end
        end
        local others = redis.call("ZCOUNT", endsKey(resource), fmt(now), "+inf")
        if held.u >= now then
          others = others - 1
        end
        writeLearned(s, learn(s, reached, ARGV[a + 8] == "1", others))
        dropPermit(s, name)
        if held.pb == "1" and reached then
          s.halfOpen = false
          redis.call("HDEL", stateKey(resource), "ho")
        end
        reply = { "Released" }
      end
    else
      if held == nil or held.u < now then
        reply = { "NotHeld" }
      else
        held.u = now + tonumber(ARGV[a + 5])
        storePermit(s, name, held)
        reply = { "Renewed", fmt(held.u) }
      end
    end
  end
  reply[#reply + 1] = snapshot(s, now)
  out[#out + 1] = reply
end
return out
