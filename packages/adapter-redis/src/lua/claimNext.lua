-- claimNext: claim up to `max` jobs the store picks (Store.claimNext, in Protocol.claimNextOrder).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), max, owner, lease ms, then the `Protocol.runnableBy`
--       filter: "-" (none), or "+" followed by one "type@version" per argument (possibly none: nothing runnable).
-- Returns: { now, results... }, each { "Claimed", job, takeover "1"/"0" } | { "Settled", job } (a claim that
--          settled the job).
-- Picks: first the running jobs whose lease ended (`x:l`, score < now), oldest insertion first: taken over at once,
--        with no sweep in between. Then the priorities with queued jobs, highest first (`x:p`); in each, due jobs by
--        runAfter, then insertion order (`x:r:<priority>`, members carry the insertion counter). Every pick is
--        claimable, so each one is claimed or settled and counts toward max. With a filter, jobs of other
--        (type, version) pairs are passed over (queued ones read in pages of at least 64) and stay as they are.
-- Atomic: the picks and the claims happen in one script; no other claimer can take a picked job in between.
-- @include base
-- @include protocol
-- @include records
-- @include claiming

deferIndexes()
local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local max = tonumber(ARGV[3])
local owner = ARGV[4]
local leaseMs = tonumber(ARGV[5])
local runnable = nil
if ARGV[6] == "+" then
  runnable = {}
  for i = 7, #ARGV do
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

local picked = {}
if max > 0 and (runnable == nil or next(runnable) ~= nil) then
  local lapsed = redis.call("ZRANGEBYSCORE", base .. K.lease, "-inf", "(" .. fmt(now))
  table.sort(lapsed)
  for _, member in ipairs(lapsed) do
    local id = idOfMember(member)
    if #picked < max and runs(id) then
      picked[#picked + 1] = id
    end
  end
  local prios = redis.call("ZREVRANGE", base .. K.prios, 0, -1)
  for _, p in ipairs(prios) do
    local offset = 0
    while #picked < max do
      local need = max - #picked
      local page = runnable == nil and need or math.max(need, 64)
      local members = redis.call("ZRANGEBYSCORE", base .. K.ready .. p, "-inf", fmt(now), "LIMIT", offset, page)
      for _, member in ipairs(members) do
        local id = idOfMember(member)
        if #picked < max and runs(id) then
          picked[#picked + 1] = id
        end
      end
      if #members < page then
        break
      end
      offset = offset + page
    end
    if #picked >= max then
      break
    end
  end
end

local out = { fmt(now) }
for _, id in ipairs(picked) do
  out[#out + 1] = claimRow(load(id), now, owner, leaseMs, nil, retentionMs)
end
publishWrites()
return out
