#!lua flags=no-writes
-- list: a filtered listing of the queue (Query.list).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: tenant, state, type, error class (each "-" or "+text"), limit ("" = all), order ("newest" | "oldest").
-- Returns: the matching jobs in createdAt order, insertion order breaking ties, at most limit.
-- Index: the jobs of one state (`x:s:<state>`, or `x:ts:<state>:<tenant>`) by createdAt, with the insertion
--        counter in the member; without a state, the five of them merged in that same order. Type and error class
--        are checked on each record walked.
-- Atomic: one script reads one instant of the queue.
-- @include base

local tenant = optString(ARGV[1])
local state = optString(ARGV[2])
local jobType = optString(ARGV[3])
local errorClass = optString(ARGV[4])
local limit = optNumber(ARGV[5])
local newest = ARGV[6] ~= "oldest"

local states = { "queued", "running", "succeeded", "failed", "abandoned" }
if state ~= nil then
  states = { state }
end
local PAGE = 200

-- One source per state: its key, a buffer of { member, score } in listing order, and the next rank to fetch.
local sources = {}
for _, s in ipairs(states) do
  local key = base .. K.state .. s
  if tenant ~= nil then
    key = base .. K.tenantState .. s .. ":" .. enc(tenant)
  end
  sources[#sources + 1] = { key = key, buffer = {}, at = 1, rank = 0, done = false }
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
  if job ~= nil and (jobType == nil or job.type == jobType) and (errorClass == nil or job.errorClass == errorClass) then
    out[#out + 1] = jobReply(job)
    if limit ~= nil and #out >= limit then
      return out
    end
  end
end
