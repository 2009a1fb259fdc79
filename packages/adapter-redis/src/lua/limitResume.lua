-- limitResume: an operator's resume of each resource (Limiter.resume, `Limits.resume`).
-- KEYS[1]: `<prefix>:{%limits}:all`; every other key is built from its prefix (the Limiter's one slot).
-- ARGV: now ("" = server TIME), then the resources.
-- Returns: { now, results... }, each { wasPaused "1"/"0", snapshot } (see limitApply).
-- Atomic: each item reads and writes its resource's state hash inside one script.
-- @include limits

local now = storeNow(ARGV[1])
local out = { fmt(now) }
for a = 2, #ARGV do
  local resource = ARGV[a]
  touch(resource)
  local s = loadLimit(resource)
  advance(s, now)
  local was = "0"
  if s.pause ~= nil or s.halfOpen then
    was = "1"
  end
  s.pause = nil
  s.halfOpen = false
  redis.call("HDEL", stateKey(resource), "pk", "pu", "pr", "ps", "ho")
  out[#out + 1] = { was, snapshot(s, now) }
end
return out
