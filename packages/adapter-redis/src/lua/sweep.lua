-- sweep: one sweeper pass over the queue (Store.sweep).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), republish-after ms, limit.
-- Returns: { now, requeued jobs, expiredFailed ids, abandoned ids, stale jobs } (each a list).
-- Order, one limit for all: (1) running jobs whose lease ended (`x:l`, score < now), oldest insertion first;
--        (2) queued jobs past their deadline (`x:dq`, score <= now), oldest insertion first; (3) stale queued
--        jobs (Protocol.isStale) by last touch (`x:tt`), then insertion, each marked republished at now without
--        moving updatedAt. The members carry the insertion counter, so sorting them sorts by insertion.
-- Counts: then the queue's counts per (state, type) (`n`, see keys.ts) are checked against the state sets: per
--        state, the totals and the cells each add up to ZCARD(`x:s:<state>`), each type's cells to its total, and
--        each tenant's cells to ZCARD(`x:ts:<state>:<tenant>`) (the running jobs: the lease set `x:l`, and no
--        check per tenant). A state that fails a check (a count written wrong, or lost) is recounted from its set,
--        one read of the record's type and tenant per job in that state; a queue stored before the counts were
--        kept is recounted whole once, then marked (`nc` in the meta hash).
-- Atomic: candidates are read and written in one script; no claim or settle lands in between.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local republishAfterMs = tonumber(ARGV[3])
local left = tonumber(ARGV[4])

local requeued, expiredFailed, abandoned, stale = {}, {}, {}, {}
local requeuedIds = {}

local function byInsertion(key, max)
  local members = redis.call("ZRANGEBYSCORE", key, "-inf", max)
  table.sort(members)
  return members
end

if left > 0 then
  for _, member in ipairs(byInsertion(base .. K.lease, "(" .. fmt(now))) do
    if left <= 0 then
      break
    end
    local job = load(idOfMember(member))
    local verdict = sweepVerdict(job, now)
    if verdict ~= nil and verdict.tag == "Expired" then
      left = left - 1
      local new = apply(job, now, sweepTransition(job, now, verdict), retentionMs)
      if new.state == "queued" then
        requeued[#requeued + 1] = jobReply(new)
        requeuedIds[new.id] = true
      elseif new.state == "failed" then
        expiredFailed[#expiredFailed + 1] = new.id
      else
        abandoned[#abandoned + 1] = new.id
      end
    end
  end
end

if left > 0 then
  for _, member in ipairs(byInsertion(base .. K.deadline, fmt(now))) do
    if left <= 0 then
      break
    end
    local job = load(idOfMember(member))
    local verdict = sweepVerdict(job, now)
    if verdict ~= nil and verdict.tag == "Overdue" then
      left = left - 1
      apply(job, now, sweepTransition(job, now, verdict), retentionMs)
      abandoned[#abandoned + 1] = job.id
    end
  end
end

if left > 0 then
  local picks = {}
  local offset = 0
  local PAGE = 500
  while #picks < left do
    local members = redis.call("ZRANGEBYSCORE", base .. K.touch, "-inf", "(" .. fmt(now - republishAfterMs), "LIMIT", offset, PAGE)
    for _, member in ipairs(members) do
      local job = load(idOfMember(member))
      if not requeuedIds[job.id] and isStale(job, job.republishedAt, now, republishAfterMs) then
        picks[#picks + 1] = job
        if #picks >= left then
          break
        end
      end
    end
    if #members < PAGE then
      break
    end
    offset = offset + PAGE
  end
  for _, job in ipairs(picks) do
    -- The republish mark is not part of the record: updatedAt stays.
    local marked = copy(job)
    marked.republishedAt = now
    save(job, marked)
    stale[#stale + 1] = jobReply(job)
  end
end

publishWrites()

local STATES = { "queued", "running", "succeeded", "failed", "abandoned" }
local IS_STATE = {}
for _, st in ipairs(STATES) do
  IS_STATE[st] = true
end

-- A field of the counts as (state, type, tenant part): "" for the type's total, "n" for no tenant, or the tenant;
-- nil for a field no script writes.
local function parseCount(field)
  local st, length, rest = string.match(field, "^(%a+):(%d+):(.*)$")
  if st == nil or not IS_STATE[st] or #rest < tonumber(length) then
    return nil
  end
  local jobType = string.sub(rest, 1, tonumber(length))
  local cell = string.sub(rest, tonumber(length) + 1)
  if cell == "" or cell == "n" then
    return st, jobType, cell
  end
  local tl, tenant = string.match(cell, "^t(%d+):(.*)$")
  if tl == nil or #tenant ~= tonumber(tl) then
    return nil
  end
  return st, jobType, "t" .. tenant
end

local countsKey = base .. K.counts
local raw = redis.call("HGETALL", countsKey)
local complete = redis.call("HGET", KEYS[1], "nc") == "1"
local fieldsOf, totals, cells, typeTotals, typeCells, tenantCells = {}, {}, {}, {}, {}, {}
for _, st in ipairs(STATES) do
  fieldsOf[st], totals[st], cells[st], typeTotals[st], typeCells[st], tenantCells[st] = {}, 0, 0, {}, {}, {}
end
local junk = {}
for i = 1, #raw, 2 do
  local st, jobType, cell = parseCount(raw[i])
  local n = tonumber(raw[i + 1])
  if st == nil or n == nil then
    junk[#junk + 1] = raw[i]
  else
    local f = fieldsOf[st]
    f[#f + 1] = raw[i]
    if cell == "" then
      totals[st] = totals[st] + n
      typeTotals[st][jobType] = (typeTotals[st][jobType] or 0) + n
    else
      cells[st] = cells[st] + n
      typeCells[st][jobType] = (typeCells[st][jobType] or 0) + n
      if cell ~= "n" then
        local t = string.sub(cell, 2)
        tenantCells[st][t] = (tenantCells[st][t] or 0) + n
      end
    end
  end
end
if #junk > 0 then
  redis.call("HDEL", countsKey, unpack(junk))
end

-- The set that holds the jobs of state `st`: its state set, or for the running jobs the lease set.
local function setOf(st)
  if st == "running" then
    return base .. K.lease
  end
  return base .. K.state .. st
end

-- Whether the counts of state `st` agree with its sets (per tenant, except for the running jobs, which have no
-- set per tenant: their cells are checked against their types' totals only).
local function agrees(st)
  local size = redis.call("ZCARD", setOf(st))
  if totals[st] ~= size or cells[st] ~= size then
    return false
  end
  for jobType, n in pairs(typeTotals[st]) do
    if typeCells[st][jobType] ~= n then
      return false
    end
  end
  for jobType, n in pairs(typeCells[st]) do
    if typeTotals[st][jobType] ~= n then
      return false
    end
  end
  for t, n in pairs(tenantCells[st]) do
    if st ~= "running" and redis.call("ZCARD", base .. K.tenantState .. st .. ":" .. enc(t)) ~= n then
      return false
    end
  end
  return true
end

-- The counts of state `st` rebuilt from its set: every job's type and tenant, in pages.
local function recount(st)
  local fresh = {}
  local key = setOf(st)
  local PAGE = 1000
  local rank = 0
  while true do
    local members = redis.call("ZRANGE", key, rank, rank + PAGE - 1)
    for _, member in ipairs(members) do
      local f = redis.call("HMGET", jobKey(idOfMember(member)), "ty", "tn")
      if f[1] then
        local total = st .. ":" .. enc(f[1])
        local cell = total .. "n"
        if f[2] then
          cell = total .. "t" .. enc(f[2])
        end
        fresh[total] = (fresh[total] or 0) + 1
        fresh[cell] = (fresh[cell] or 0) + 1
      end
    end
    if #members < PAGE then
      break
    end
    rank = rank + PAGE
  end
  local old = fieldsOf[st]
  for from = 1, #old, 500 do
    redis.call("HDEL", countsKey, unpack(old, from, math.min(from + 499, #old)))
  end
  local args = {}
  for field, n in pairs(fresh) do
    args[#args + 1] = field
    args[#args + 1] = n
  end
  for from = 1, #args, 1000 do
    redis.call("HSET", countsKey, unpack(args, from, math.min(from + 999, #args)))
  end
end

for _, st in ipairs(STATES) do
  if not complete or not agrees(st) then
    recount(st)
  end
end
if not complete then
  redis.call("HSET", KEYS[1], "nc", "1")
end
-- The running jobs' state set of earlier versions (running jobs are in the lease set alone now): no reader left.
redis.call("UNLINK", base .. K.state .. "running")

return { fmt(now), requeued, expiredFailed, abandoned, stale }
