-- retract: take back jobs a submit created by mistake (a job id that another queue already holds, found by the
-- route written beside the submit): each is deleted only while nothing has happened to it yet.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: job ids.
-- Returns: "1" (deleted) or "0" (absent, or already claimed, charged or otherwise written) per id.
-- Atomic: the untouched check and the deletion are one script, so a job a worker claimed meanwhile stays.
-- @include base
-- @include protocol
-- @include records

local out = {}
for i = 1, #ARGV do
  local job = load(ARGV[i])
  if job ~= nil and job.state == "queued" and job.leaseToken == 0 and job.updatedAt == job.createdAt
    and redis.call("EXISTS", chargesKey(job.id)) == 0 then
    removeJob(job)
    out[i] = "1"
  else
    out[i] = "0"
  end
end
flushCounts()
return out
