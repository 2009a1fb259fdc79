-- picking: the `Protocol.runnableBy` filter of a claimNext and the plain claimNext itself (Store.claimNext in
-- Protocol.claimNextOrder), shared by claimNext, claimNextFair and cycle. Needs base, protocol, records and claiming.

-- The filter in ARGV[at..#ARGV]: "-" (none: nil), or "+" followed by one "type@version" per argument (a set,
-- possibly empty: nothing is runnable).
local function runnableFrom(at)
  if ARGV[at] ~= "+" then
    return nil
  end
  local runnable = {}
  for i = at + 1, #ARGV do
    runnable[ARGV[i]] = true
  end
  return runnable
end

-- Protocol.runnableBy, on the record's type and version fields.
local function runsUnder(runnable, id)
  if runnable == nil then
    return true
  end
  local tv = redis.call("HMGET", jobKey(id), "ty", "v")
  return runnable[tostring(tv[1]) .. "@" .. tostring(tonumber(tv[2]))] == true
end

-- claimNext without `fair`: ARGV[at..] = max, owner, lease ms, then the filter; each claim's result appended to
-- `out`. Picks first the running jobs whose lease ended (`x:l`, score < now), oldest insertion first, then the
-- priorities with queued jobs, highest first (`x:p`), in each due jobs by runAfter, then insertion order
-- (`x:r:<priority>`, members carry the insertion counter); with a filter, queued jobs are read in pages of at
-- least 64. Every pick is claimable, so each one is claimed or settled and counts toward max. Reads the lease and
-- ready indexes: any index writes gathered before it must have been sent.
local function claimNextItems(now, retentionMs, at, out)
  local max = tonumber(ARGV[at])
  local owner = ARGV[at + 1]
  local leaseMs = tonumber(ARGV[at + 2])
  local runnable = runnableFrom(at + 3)
  local picked = {}
  if max > 0 and (runnable == nil or next(runnable) ~= nil) then
    local lapsed = redis.call("ZRANGEBYSCORE", base .. K.lease, "-inf", "(" .. fmt(now))
    table.sort(lapsed)
    for _, member in ipairs(lapsed) do
      local id = idOfMember(member)
      if #picked < max and runsUnder(runnable, id) then
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
          if #picked < max and runsUnder(runnable, id) then
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
  for _, id in ipairs(picked) do
    out[#out + 1] = claimRow(load(id), now, owner, leaseMs, nil, retentionMs)
  end
end
