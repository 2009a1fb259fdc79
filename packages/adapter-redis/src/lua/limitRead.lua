-- limitRead: resources as stored, for Limiter.read (which describes them at `now` with `Limits.describe`).
-- KEYS[1]: `<prefix>:{%limits}:all`; every other key is built from its prefix (the Limiter's one slot).
-- ARGV: now ("" = server TIME), then the resources; none: every resource in `all`.
-- Returns: { now, resources... }, each { resource, state hash (flat), permit values }.
-- Writes nothing.
-- @include limits

local now = storeNow(ARGV[1])
local names = {}
if #ARGV > 1 then
  for a = 2, #ARGV do
    names[#names + 1] = ARGV[a]
  end
else
  names = redis.call("SMEMBERS", KEYS[1])
end
local out = { fmt(now) }
for _, resource in ipairs(names) do
  out[#out + 1] = {
    resource,
    redis.call("HGETALL", stateKey(resource)),
    redis.call("HVALS", permitsKey(resource))
  }
end
return out
