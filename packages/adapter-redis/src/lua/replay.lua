-- replay: move dead letters back to queued (Store.replay).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), this queue's name, the filter's queue, tenant, error class, type and input hash
--       (each optional: "-" or "+text"), then one job id per item.
-- Returns: { now, results... }, each { "Replayed", job } | { "Skipped", state | false }.
-- Atomic: the eligibility (failed, matching the filter) and the write are one script, so a job that left
--         failed meanwhile (a succeeded one above all) is never replayed.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local filter = {
  ownQueue = ARGV[2],
  queue = optString(ARGV[3]),
  tenant = optString(ARGV[4]),
  errorClass = optString(ARGV[5]),
  type = optString(ARGV[6]),
  inputHash = optString(ARGV[7])
}
local out = { fmt(now) }
for a = 8, #ARGV do
  local job = load(ARGV[a])
  if job == nil then
    out[#out + 1] = { "Skipped", false }
  elseif not replayable(job, filter) then
    out[#out + 1] = { "Skipped", job.state }
  else
    out[#out + 1] = { "Replayed", jobReply(apply(job, now, replayTransition(job, now))) }
  end
end
publishWrites()
return out
