#!lua flags=no-writes
-- list: a filtered listing of the queue (Query.list).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant, state, type, error class (each "-" or "+text"), limit ("" = all), order ("newest" | "oldest"),
--       request key ("-" or "+text"), then the cursor: its createdAt ("" = none), where this queue's entries at
--       that createdAt fall against it in ascending (score, member) order ("same": by the cursor's member, the
--       next ARGV, the cursor being a job of this queue; "high": all above it; "low": all below it), its member,
--       then the input hash ("-" or "+text").
-- Returns: the matching jobs in createdAt order, insertion order breaking ties, at most limit, after the cursor.
-- Index: the jobs of one state (`x:s:<state>`, or `x:ts:<state>:<tenant>`) by createdAt, with the insertion
--        counter in the member, except the running jobs, read whole from the lease set (`x:l`) with each one's
--        createdAt and sorted (`runningJobs`); without a state, the five of them merged in that same order; with a request
--        key, the jobs of that key (`x:k:<key>`) alone. Type, error class and input hash (and with a key, state
--        and tenant) are checked on each record walked. The cursor's place in each source is found by ZCOUNT and a binary
--        search over its ties, so a page costs O(log^2 n) to find, not a walk from the start.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local state = optString(ARGV[2])
local jobType = optString(ARGV[3])
local errorClass = optString(ARGV[4])
local limit = optNumber(ARGV[5])
local newest = ARGV[6] ~= "oldest"
local requestKey = optString(ARGV[7])
local afterScore = optNumber(ARGV[8])
local afterTies = ARGV[9]
local afterMember = ARGV[10]
local inputHash = optString(ARGV[11])

local PAGE = 200

-- How many entries of `key` come before the cursor in ascending (score, member) order: strictly before
-- (`strict`) or also the cursor's own place. The ties at the cursor's score are searched by member.
local function ranked(key, strict)
  local lo = redis.call("ZCOUNT", key, "-inf", "(" .. fmt(afterScore))
  local hi = redis.call("ZCOUNT", key, "-inf", fmt(afterScore))
  if afterTies == "high" or lo == hi then
    return lo
  end
  if afterTies == "low" then
    return hi
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local member = redis.call("ZRANGE", key, mid, mid)[1]
    if member < afterMember or (not strict and member == afterMember) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo
end

-- The rank (in the listing's direction) of the first entry after the cursor.
local function startRank(key)
  if afterScore == nil then
    return 0
  end
  if newest then
    return redis.call("ZCARD", key) - ranked(key, true)
  end
  return ranked(key, false)
end

-- Whether an entry { member, score } comes after the cursor in the listing's direction (the rule `startRank`
-- applies to a sorted set, for the running jobs, which are read whole).
local function afterCursor(entry)
  if afterScore == nil then
    return true
  end
  if entry[2] ~= afterScore then
    return (entry[2] > afterScore) ~= newest
  end
  if afterTies == "high" then
    return not newest
  end
  if afterTies == "low" then
    return newest
  end
  if newest then
    return entry[1] < afterMember
  end
  return entry[1] > afterMember
end

-- The running jobs as a source already read (see `runningJobs`): those after the cursor, in listing order.
local function runningSource()
  local all = runningJobs(tenant)
  local buffer = {}
  local from, to, step = 1, #all, 1
  if newest then
    from, to, step = #all, 1, -1
  end
  for i = from, to, step do
    if afterCursor(all[i]) then
      buffer[#buffer + 1] = all[i]
    end
  end
  return { buffer = buffer, at = 1, done = true }
end

-- One source per state (or the request key's one): its key, a buffer of { member, score } in listing order, and
-- the next rank to fetch.
local sources = {}
if requestKey ~= nil then
  local key = base .. K.keyed .. enc(requestKey)
  sources[1] = { key = key, buffer = {}, at = 1, rank = startRank(key), done = false }
else
  local states = { "queued", "running", "succeeded", "failed", "abandoned" }
  if state ~= nil then
    states = { state }
  end
  for _, s in ipairs(states) do
    if s == "running" then
      sources[#sources + 1] = runningSource()
    else
      local key = base .. K.state .. s
      if tenant ~= nil then
        key = base .. K.tenantState .. s .. ":" .. enc(tenant)
      end
      sources[#sources + 1] = { key = key, buffer = {}, at = 1, rank = startRank(key), done = false }
    end
  end
end

local function head(source)
  if source.at > #source.buffer then
    if source.done then
      return nil
    end
    local raw
    if newest then
      raw = redis.call("ZREVRANGE", source.key, source.rank, source.rank + PAGE - 1, "WITHSCORES")
    else
      raw = redis.call("ZRANGE", source.key, source.rank, source.rank + PAGE - 1, "WITHSCORES")
    end
    source.buffer = {}
    for i = 1, #raw, 2 do
      source.buffer[#source.buffer + 1] = { raw[i], tonumber(raw[i + 1]) }
    end
    source.at = 1
    source.rank = source.rank + PAGE
    if #raw < 2 * PAGE then
      source.done = true
    end
    if #source.buffer == 0 then
      return nil
    end
  end
  return source.buffer[source.at]
end

-- Whether entry a comes before entry b in the listing.
local function before(a, b)
  if a[2] ~= b[2] then
    if newest then
      return a[2] > b[2]
    end
    return a[2] < b[2]
  end
  if newest then
    return a[1] > b[1]
  end
  return a[1] < b[1]
end

local out = {}
if limit ~= nil and limit <= 0 then
  return out
end
while true do
  local best = nil
  local bestSource = nil
  for _, source in ipairs(sources) do
    local entry = head(source)
    if entry ~= nil and (best == nil or before(entry, best)) then
      best = entry
      bestSource = source
    end
  end
  if best == nil then
    return out
  end
  bestSource.at = bestSource.at + 1
  local job = load(idOfMember(best[1]))
  if job ~= nil and (jobType == nil or job.type == jobType) and (errorClass == nil or job.errorClass == errorClass)
    and (inputHash == nil or job.inputHash == inputHash)
    and (requestKey == nil or ((state == nil or job.state == state) and (tenant == nil or job.tenant == tenant))) then
    out[#out + 1] = jobReply(job)
    if limit ~= nil and #out >= limit then
      return out
    end
  end
end
