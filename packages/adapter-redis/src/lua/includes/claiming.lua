-- claiming: one claim of one job (Protocol.claimVerdict, then Protocol.claimTransition), shared by claim and
-- claimNext. `estimate` nil takes Protocol.fallbackEstimate over the job's ledger.

local function claimRow(job, now, owner, leaseMs, estimate, retentionMs)
  if estimate == nil then
    estimate = fallbackEstimate(chargesOf(job.id))
  end
  local verdict = claimVerdict(job, now, estimate)
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
