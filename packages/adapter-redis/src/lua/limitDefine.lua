-- limitDefine: set each resource's limits (Limiter.define, `Limits.define`).
-- KEYS[1]: `<prefix>:{%limits}:all`; every other key is built from its prefix (the Limiter's one slot).
-- ARGV: now ("" = server TIME), then 8 values per item: resource, maxConcurrent, requests, input tokens and output
--       tokens per minute, burst seconds, the share's minPriority and share ("" where not set).
-- Returns: { now, results... }, each { snapshot } (see limitApply).
-- Atomic: each item reads and writes its resource's state hash inside one script.
-- @include limits

local FIELDS = { "mc", "rpm", "ipm", "opm", "bs", "smp", "ssh" }

local now = storeNow(ARGV[1])
local out = { fmt(now) }
for a = 2, #ARGV, 8 do
  local resource = ARGV[a + 0]
  touch(resource)
  local s = loadLimit(resource)
  advance(s, now)
  local next = {}
  for k, field in ipairs(FIELDS) do
    next[field] = num(ARGV[a + k])
  end
  local key = stateKey(resource)
  for _, d in ipairs(DIMS) do
    local limit = next[d.limit]
    if limit == nil then
      redis.call("HDEL", key, d.level, d.at)
    else
      local cap = capacity(next, limit)
      local old = s.buckets[d.name]
      local oldLimit = s.limits[d.limit]
      if old == nil or oldLimit == nil then
        writeBucket(s, d, { level = cap, at = now })
      else
        writeBucket(s, d, { level = math.min(cap, levelAt(old, oldLimit, capacity(s.limits, oldLimit), now)), at = math.max(old.at, now) })
      end
    end
  end
  for _, field in ipairs(FIELDS) do
    if next[field] == nil then
      redis.call("HDEL", key, field)
    else
      redis.call("HSET", key, field, fmt(next[field]))
    end
  end
  s.limits = next
  -- A learned cap at or above the new declared cap is forgotten.
  if s.learned ~= nil and next.mc ~= nil and next.mc <= s.learned.cap then
    writeLearned(s, nil)
  end
  out[#out + 1] = { snapshot(s, now) }
end
return out
