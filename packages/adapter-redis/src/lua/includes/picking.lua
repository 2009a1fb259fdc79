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

-- Protocol.runnableBy on a record's type and version fields (as stored: text, or nil when absent).
local function runsAs(runnable, jobType, version)
  return runnable[tostring(jobType) .. "@" .. tostring(tonumber(version))] == true
end

-- Protocol.runnableBy, on the record's type and version fields.
local function runsUnder(runnable, id)
  if runnable == nil then
    return true
  end
  local tv = redis.call("HMGET", jobKey(id), "ty", "v")
  return runsAs(runnable, tv[1], tv[2])
end

-- The record of a job that runs under the filter `runnable` (Protocol.runnableBy, as `runsUnder`), or nil (no such
-- job, or one of another type or version). A plain claimNext claims every job it picks, so it reads each
-- candidate's whole record once: the check looks at the type and version in that read, and a job that passes is
-- claimed from it, instead of a read of the two fields here and another of the whole record for the claim.
local function runnableRecord(runnable, id)
  local raw = redis.call("HGETALL", jobKey(id))
  local jobType, version = nil, nil
  for i = 1, #raw, 2 do
    local short = raw[i]
    if short == "ty" then
      jobType = raw[i + 1]
    elseif short == "v" then
      version = raw[i + 1]
    end
  end
  if not runsAs(runnable, jobType, version) then
    return nil
  end
  return decode(id, raw)
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
  -- With a filter, the records read by the check, by id (see runnableRecord).
  local records = {}
  local function consider(id)
    if runnable == nil then
      picked[#picked + 1] = id
      return
    end
    local job = runnableRecord(runnable, id)
    if job ~= nil then
      picked[#picked + 1] = id
      records[id] = job
    end
  end
  if max > 0 and (runnable == nil or next(runnable) ~= nil) then
    local lapsed = redis.call("ZRANGEBYSCORE", base .. K.lease, "-inf", "(" .. fmt(now))
    table.sort(lapsed)
    for _, member in ipairs(lapsed) do
      if #picked < max then
        consider(idOfMember(member))
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
          if #picked < max then
            consider(idOfMember(member))
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
  -- A claim writes only its own job (and its batch, and new callback jobs), so a record read while picking is still
  -- the job's when its turn comes. Each read serves one claim: an id picked twice (which the indexes never hold) is
  -- read again, after its first claim, as before.
  for _, id in ipairs(picked) do
    local job = records[id]
    records[id] = nil
    out[#out + 1] = claimRow(job or load(id), now, owner, leaseMs, nil, retentionMs)
  end
end
