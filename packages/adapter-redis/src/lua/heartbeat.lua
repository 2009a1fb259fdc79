-- heartbeat: renew leases under their tokens (Store.heartbeat).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), then 4 values per item: job id, token, lease ms, progress ("" = unchanged).
-- Returns: { now, results... }, each { "Renewed", leaseUntil, cancelRequested "1"/"0", costCents } |
--          { "LeaseLost", currentToken | false, state | false }.
-- Atomic: the fence (running under exactly this token) and the write are one script.
-- @include base
-- @include protocol
-- @include records
-- @include fenced

-- The fields a renewal reads or writes: the fence (state, token), the lease and progress it sets, updatedAt,
-- the reply's cancel mark and spend, and the insertion counter of the lease index's member. It changes neither the
-- state nor the spend, so no other index, sum or batch count moves and nothing else is read.
local RENEWAL = { "st", "tk", "lu", "pg", "ca", "cc", "up", "sq" }

deferIndexes()
local now = storeNow(ARGV[1])
local out = { fmt(now) }
for a = 2, #ARGV, 4 do
  local job = loadFields(ARGV[a], RENEWAL)
  local token = tonumber(ARGV[a + 1])
  if job == nil or not holds(job, token) then
    out[#out + 1] = lost(job)
  else
    local new = apply(job, now, heartbeatTransition(job, now, tonumber(ARGV[a + 2]), optNumber(ARGV[a + 3])))
    local cancel = "0"
    if new.cancelRequestedAt ~= nil then
      cancel = "1"
    end
    out[#out + 1] = { "Renewed", fmt(new.leaseUntil), cancel, fmt(new.costCents) }
  end
end
publishWrites()
return out
