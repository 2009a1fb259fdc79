-- settling: the items of a settle (Store.settle), shared by settle and cycle: ARGV[from..to] in groups of 8 (job id,
-- token, kind, result JSON, delay ms, error class, error, abandon reason; see settle.lua), each result appended to
-- `out`. Needs base, protocol, records and fenced.

local function settleItems(now, retentionMs, from, to, out)
  for a = from, to, 8 do
    local job = load(ARGV[a])
    local token = tonumber(ARGV[a + 1])
    if job == nil or not holds(job, token) then
      out[#out + 1] = lost(job)
    else
      local outcome = {
        kind = ARGV[a + 2],
        result = ARGV[a + 3],
        delayMs = optNumber(ARGV[a + 4]),
        errorClass = optString(ARGV[a + 5]),
        error = optString(ARGV[a + 6]),
        reason = ARGV[a + 7]
      }
      local tr = settleTransition(job, now, outcome)
      local new = apply(job, now, tr, retentionMs)
      -- A completed job's result is the one this item sent: the reply's result slot says so (see jobReply).
      out[#out + 1] = { "Settled", jobReply(new, tr.result ~= nil and tr.result == outcome.result) }
    end
  end
end
