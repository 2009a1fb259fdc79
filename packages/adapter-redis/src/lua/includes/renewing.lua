-- renewing: the items of a heartbeat (Store.heartbeat), shared by heartbeat and cycle: ARGV[from..to] in groups of
-- 4 (job id, token, lease ms, progress or ""), each result appended to `out`. Needs base, protocol, records and
-- fenced.

-- The fields a renewal reads or writes: the fence (state, token), the lease and progress it sets, updatedAt,
-- the reply's cancel mark and spend, and the insertion counter of the lease index's member. It changes neither the
-- state nor the spend, so no other index, sum or batch count moves and nothing else is read.
local RENEWAL = { "st", "tk", "lu", "pg", "ca", "cc", "up", "sq" }

local function renewItems(now, from, to, out)
  for a = from, to, 4 do
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
end
