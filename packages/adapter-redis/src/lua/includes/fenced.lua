-- fenced: the LeaseLost reply of a fenced write that missed: the job's current token and state (false when
-- there is no such job).

local function lost(job)
  if job == nil then
    return { "LeaseLost", false, false }
  end
  return { "LeaseLost", fmt(job.leaseToken), job.state }
end
