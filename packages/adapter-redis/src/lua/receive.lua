-- receive: hand out deliveries of due, visible queued jobs (RedisTransport.receive).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), max, visibility ms.
-- Returns: { now, deliveries... }, each { id, type, version, priority, receive count }.
-- Picks: the priorities with queued jobs, highest first (`x:p`); in each, jobs whose delivery time (the later of
--        runAfter and the end of the last hiding, `x:v:<priority>`) has come, earliest first, then insertion order.
--        Each pick is hidden for the visibility time and its receive count (the receipt) goes up. These marks are
--        the transport's, not the record's: updatedAt stays.
-- Atomic: picks and marks in one script, so two receivers never get the same job in one visibility window.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local max = tonumber(ARGV[2])
local visibilityMs = tonumber(ARGV[3])

local out = { fmt(now) }
if max > 0 then
  local prios = redis.call("ZREVRANGE", base .. K.prios, 0, -1)
  local picked = 0
  for _, p in ipairs(prios) do
    local need = max - picked
    if need <= 0 then
      break
    end
    local members = redis.call("ZRANGEBYSCORE", base .. K.visible .. p, "-inf", fmt(now), "LIMIT", 0, need)
    for _, member in ipairs(members) do
      local job = load(idOfMember(member))
      local marked = copy(job)
      marked.visibleAt = now + visibilityMs
      marked.receiveCount = (job.receiveCount or 0) + 1
      save(job, marked)
      picked = picked + 1
      out[#out + 1] = { job.id, job.type, fmt(job.version), fmt(job.priority), fmt(marked.receiveCount) }
    end
  end
end
return out
