-- claiming: one claim of one job (Protocol.claimVerdict, then Protocol.claimTransition), shared by claim and
-- claimNext, and Batch.claimVerdict for an item of a batch. `estimate` nil takes Protocol.fallbackEstimate over the job's ledger.

local function claimRow(job, now, owner, leaseMs, estimate, retentionMs)
  -- The estimate is only ever weighed against a budget (the job's, or its batch's), so without one the ledger is
  -- not read: any estimate gives the same verdict.
  if estimate == nil and (job.budgetCents ~= nil or job.batchId ~= nil) then
    estimate = fallbackEstimate(chargesOf(job.id))
  end
  local verdict = claimVerdict(job, now, estimate)
  -- Batch.claimVerdict: an item of a cancelled batch, or of one whose spend cannot cover the estimate, is settled.
  if verdict.tag == "Claim" and job.batchId ~= nil then
    local b = loadBatch(job.batchId)
    if b ~= nil and b.cancelRequestedAt ~= nil then
      verdict = { tag = "Settle", takeover = verdict.takeover, reason = "cancelled" }
    elseif b ~= nil and not budgetFits(b.budgetCents, b.costCents, estimate) then
      verdict = { tag = "Settle", takeover = verdict.takeover, reason = "budget" }
    end
  end
  if verdict.tag == "Settled" then
    return { "Settled", jobReply(job) }
  end
  if verdict.tag == "Busy" then
    return { "Busy", jobReply(job), fmt(verdict["until"]) }
  end
  if verdict.tag == "NotDue" then
    return { "NotDue", jobReply(job), fmt(verdict["until"]) }
  end
  local new = apply(job, now, claimTransition(job, now, verdict, owner, leaseMs), retentionMs)
  if verdict.tag == "Settle" then
    return { "Settled", jobReply(new) }
  end
  local takeover = "0"
  if verdict.takeover then
    takeover = "1"
  end
  return { "Claimed", jobReply(new), takeover }
end
