-- sweep: one sweeper pass over the queue (Store.sweep).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), republish-after ms, limit.
-- Returns: { now, requeued jobs, expiredFailed ids, abandoned ids, stale jobs } (each a list).
-- Order, one limit for all: (1) running jobs whose lease ended (`x:l`, score < now), oldest insertion first;
--        (2) queued jobs past their deadline (`x:dq`, score <= now), oldest insertion first; (3) stale queued
--        jobs (Protocol.isStale) by last touch (`x:tt`), then insertion, each marked republished at now without
--        moving updatedAt. The members carry the insertion counter, so sorting them sorts by insertion.
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
    local members = redis.call("ZRANGEBYSCORE", base .. K.touch, "-inf", fmt(now - republishAfterMs), "LIMIT", offset, PAGE)
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
return { fmt(now), requeued, expiredFailed, abandoned, stale }
