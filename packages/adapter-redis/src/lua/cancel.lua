-- cancel: cancel jobs (Store.cancel): queued ones are abandoned at once, running ones get a request.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), then 2 values per item: job id, tenant (opt).
-- Returns: { now, results... }, each { "Cancelled", job } | { "AlreadyTerminal", job } | { "NotFound" }.
-- Atomic: the verdict and the write are one script.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local out = { fmt(now) }
for a = 3, #ARGV, 2 do
  local job = load(ARGV[a])
  local tenant = optString(ARGV[a + 1])
  if job == nil or (tenant ~= nil and job.tenant ~= tenant) then
    out[#out + 1] = { "NotFound" }
  else
    local verdict = cancelVerdict(job)
    if verdict == "AlreadyTerminal" then
      out[#out + 1] = { "AlreadyTerminal", jobReply(job) }
    elseif verdict == "Unchanged" then
      out[#out + 1] = { "Cancelled", jobReply(job) }
    else
      out[#out + 1] = { "Cancelled", jobReply(apply(job, now, cancelTransition(job, now, verdict), retentionMs)) }
    end
  end
end
publishWrites()
return out
