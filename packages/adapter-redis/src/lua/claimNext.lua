-- claimNext: claim up to `max` due queued jobs the store picks (Store.claimNext).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), max, owner, lease ms.
-- Returns: { now, results... }, each { "Claimed", job, "0" } | { "Settled", job } (a claim that settled the job).
-- Picks: the priorities with queued jobs, highest first (`x:p`); in each, due jobs by runAfter, then insertion
--        order (`x:r:<priority>`, members carry the insertion counter). Every pick is due and queued, so each one
--        is claimed or settled and counts toward max.
-- Atomic: the picks and the claims happen in one script; no other claimer can take a picked job in between.
-- @include base
-- @include protocol
-- @include records
-- @include claiming

local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local max = tonumber(ARGV[3])
local owner = ARGV[4]
local leaseMs = tonumber(ARGV[5])

local picked = {}
if max > 0 then
  local prios = redis.call("ZREVRANGE", base .. K.prios, 0, -1)
  for _, p in ipairs(prios) do
    local need = max - #picked
    if need <= 0 then
      break
    end
    local members = redis.call("ZRANGEBYSCORE", base .. K.ready .. p, "-inf", fmt(now), "LIMIT", 0, need)
    for _, member in ipairs(members) do
      picked[#picked + 1] = idOfMember(member)
    end
  end
end

local out = { fmt(now) }
for _, id in ipairs(picked) do
  out[#out + 1] = claimRow(load(id), now, owner, leaseMs, nil, retentionMs)
end
publishWrites()
return out
