-- protocol: the rules of @slowcall/core's Protocol.ts, function for function, over job tables (nil is null).
-- Nothing here touches a key. The model-based property of @slowcall/testing checks every script built on these
-- against Protocol.ts itself, so a drift shows up as a differing reply or record.

local TRANSITIONS = {
  ["queued:claim"] = "running",
  ["queued:cancel"] = "abandoned",
  ["queued:abandon"] = "abandoned",
  ["queued:fail"] = "failed",
  ["running:complete"] = "succeeded",
  ["running:retry"] = "queued",
  ["running:release"] = "queued",
  ["running:expire"] = "queued",
  ["running:fail"] = "failed",
  ["running:abandon"] = "abandoned",
  ["running:takeover"] = "running",
  ["running:cancel"] = "running",
  ["failed:replay"] = "queued"
}

-- StateMachine.next; an illegal event is a bug in the script (a defect, never a reply).
local function step(from, event)
  local to = TRANSITIONS[from .. ":" .. event]
  if to == nil then
    error("protocol: illegal transition " .. event .. " from " .. from)
  end
  return to
end

local function isTerminal(state)
  return state == "succeeded" or state == "abandoned" or state == "failed"
end

-- Protocol.bump: store time, or one microsecond past the previous value.
local function bump(previous, now)
  return math.max(now, (math.floor(previous * 1000 + 0.5) + 1) / 1000)
end

-- The record after a write at `now`: the patch applied (NULL clears a field), updatedAt bumped.
local function write(job, now, patch)
  local out = copy(job)
  for k, v in pairs(patch) do
    if v == NULL then
      out[k] = nil
    else
      out[k] = v
    end
  end
  out.updatedAt = bump(job.updatedAt, now)
  return out
end

-- A transition carries its patch too, so the store writes only the fields it names (records.lua `apply`).
local function transition(before, now, patch, stop, start)
  local job = write(before, now, patch)
  return {
    job = job,
    patch = patch,
    stop = stop,
    start = start,
    becameFailed = job.state == "failed" and before.state ~= "failed"
  }
end

local function leaseCleared(patch)
  patch.leaseOwner = NULL
  patch.leaseUntil = NULL
  return patch
end

local function orNull(v)
  if v == nil then
    return NULL
  end
  return v
end

-- Protocol.budgetFits
local function budgetFits(budget, cost, estimate)
  return budget == nil or (cost < budget and cost + estimate <= budget)
end

-- Protocol.fallbackEstimate over ledger rows in insertion order.
local function fallbackEstimate(rows)
  local byToken = {}
  local largest = 0
  for _, row in ipairs(rows) do
    byToken[row.token] = (byToken[row.token] or 0) + row.amountCents
  end
  for _, total in pairs(byToken) do
    largest = math.max(largest, total)
  end
  return largest
end

-- Protocol.chargeStep: the row to store and the delta of the job's spend, or nil when nothing changes.
local function chargeStep(existing, charge, now)
  if existing == nil then
    return {
      row = {
        callId = charge.callId,
        token = charge.token,
        amountCents = charge.amountCents,
        settled = charge.settled,
        createdAt = now,
        updatedAt = now
      },
      delta = charge.amountCents
    }
  end
  if existing.settled or not charge.settled then
    return nil
  end
  local row = copy(existing)
  row.amountCents = charge.amountCents
  row.settled = true
  row.updatedAt = bump(existing.updatedAt, now)
  return { row = row, delta = charge.amountCents - existing.amountCents }
end

-- Protocol.charged
local function charged(job, delta, now)
  return write(job, now, { costCents = job.costCents + delta })
end

-- Job.attemptsLeft
local function attemptsLeft(job)
  return math.max(0, job.maxAttempts - (job.attempts - job.attemptsBase))
end

-- One SubmitItem from the 15 script arguments after ARGV[a], in the order `codec.itemArgs` writes them.
local ITEM_ARITY = 15
local function readItem(a)
  return {
    id = ARGV[a + 1],
    tenant = optString(ARGV[a + 2]),
    type = ARGV[a + 3],
    version = tonumber(ARGV[a + 4]),
    requestKey = optString(ARGV[a + 5]),
    inputHash = ARGV[a + 6],
    input = ARGV[a + 7],
    inputRef = optString(ARGV[a + 8]),
    priority = optNumber(ARGV[a + 9]),
    delayMs = optNumber(ARGV[a + 10]),
    deadlineAt = optNumber(ARGV[a + 11]),
    budgetCents = optNumber(ARGV[a + 12]),
    maxAttempts = tonumber(ARGV[a + 13]),
    traceId = optString(ARGV[a + 14]),
    fingerprint = optString(ARGV[a + 15])
  }
end

-- Protocol.newJob; `item` carries the SubmitItem's fields (nil for null).
local function newJob(item, now, seq)
  return {
    id = item.id,
    tenant = item.tenant,
    type = item.type,
    version = item.version,
    requestKey = item.requestKey,
    inputHash = item.inputHash,
    inputRef = item.inputRef,
    fingerprint = item.fingerprint,
    state = "queued",
    attempts = 0,
    attemptsBase = 0,
    maxAttempts = item.maxAttempts,
    leaseToken = 0,
    runAfter = now + math.max(0, item.delayMs or 0),
    priority = item.priority or 0,
    deadlineAt = item.deadlineAt,
    budgetCents = item.budgetCents,
    costCents = 0,
    progress = 0,
    traceId = item.traceId,
    createdAt = now,
    updatedAt = now,
    seq = seq
  }
end

-- Protocol.submitVerdict: the fingerprints when both sides have one, else the input hashes.
local function submitVerdict(existing, item)
  if existing.fingerprint ~= nil and item.fingerprint ~= nil then
    if existing.fingerprint == item.fingerprint then
      return "Existing"
    end
    return "KeyReused"
  end
  if existing.inputHash == item.inputHash then
    return "Existing"
  end
  return "KeyReused"
end

-- Protocol.settleReason; `estimate` nil skips the budget.
local function settleReason(job, now, estimate)
  if job.cancelRequestedAt ~= nil then
    return "cancelled"
  end
  if job.deadlineAt ~= nil and job.deadlineAt <= now then
    return "deadline"
  end
  if attemptsLeft(job) == 0 then
    return "exhausted"
  end
  if estimate ~= nil and not budgetFits(job.budgetCents, job.costCents, estimate) then
    return "budget"
  end
  return nil
end

-- Protocol.claimVerdict: { tag = "Settled" | "Busy" | "NotDue" | "Settle" | "Claim", until, takeover, reason }
local function claimVerdict(job, now, estimate)
  if isTerminal(job.state) then
    return { tag = "Settled" }
  end
  if job.state == "running" and (job.leaseUntil == nil or job.leaseUntil >= now) then
    return { tag = "Busy", ["until"] = job.leaseUntil or now }
  end
  if job.state == "queued" and job.runAfter > now then
    return { tag = "NotDue", ["until"] = job.runAfter }
  end
  local takeover = job.state == "running"
  local reason = settleReason(job, now, estimate)
  if reason == nil then
    return { tag = "Claim", takeover = takeover }
  end
  return { tag = "Settle", takeover = takeover, reason = reason }
end

local function expiredEnd(job)
  return { token = job.leaseToken, outcome = "expired", errorClass = "lease_expired" }
end

local function settleBy(job, now, reason, takeover, stop)
  if reason == "cancelled" then
    local event = "cancel"
    if takeover then
      event = "abandon"
    end
    return transition(job, now, leaseCleared({ state = step(job.state, event), abandonReason = "cancelled" }), stop)
  end
  if reason == "deadline" or reason == "budget" then
    return transition(job, now, leaseCleared({ state = step(job.state, "abandon"), abandonReason = reason }), stop)
  end
  -- exhausted
  local errorClass = orNull(job.errorClass)
  if takeover then
    errorClass = "lease_expired"
  end
  return transition(job, now, leaseCleared({ state = step(job.state, "fail"), errorClass = errorClass }), stop)
end

-- Protocol.claimTransition
local function claimTransition(job, now, verdict, owner, leaseMs)
  local stop = nil
  if verdict.takeover then
    stop = expiredEnd(job)
  end
  if verdict.tag == "Settle" then
    return settleBy(job, now, verdict.reason, verdict.takeover, stop)
  end
  local token = job.leaseToken + 1
  local event = "claim"
  if verdict.takeover then
    event = "takeover"
  end
  return transition(job, now, {
    state = step(job.state, event),
    attempts = job.attempts + 1,
    leaseToken = token,
    leaseOwner = owner,
    leaseUntil = now + leaseMs,
    cancelRequestedAt = NULL
  }, stop, { token = token, worker = owner })
end

-- Protocol.holds
local function holds(job, token)
  return job.state == "running" and job.leaseToken == token
end

-- Protocol.heartbeatTransition (a lease's end never moves back); `progress` nil keeps the stored one.
local function heartbeatTransition(job, now, leaseMs, progress)
  local leaseUntil = now + leaseMs
  if job.leaseUntil ~= nil and job.leaseUntil > leaseUntil then
    leaseUntil = job.leaseUntil
  end
  local patch = { leaseUntil = leaseUntil }
  if progress ~= nil then
    patch.progress = math.min(1, math.max(0, progress))
  end
  return transition(job, now, patch)
end

-- Protocol.settleTransition; `o` = { kind, result, delayMs, errorClass, error, reason } (nil for absent).
local function settleTransition(job, now, o)
  local function stop(outcome, errorClass, evidence)
    return { token = job.leaseToken, outcome = outcome, errorClass = errorClass, evidence = evidence }
  end
  if o.kind == "complete" then
    local tr = transition(job, now, leaseCleared({
      state = step(job.state, "complete"),
      progress = 1,
      errorClass = NULL,
      lastError = NULL
    }), stop("succeeded"))
    tr.result = o.result
    return tr
  end
  if o.kind == "retry" then
    local runAfter = now + math.max(0, o.delayMs)
    if job.deadlineAt ~= nil and runAfter >= job.deadlineAt then
      return settleTransition(job, now, {
        kind = "abandon",
        reason = "deadline",
        errorClass = o.errorClass,
        error = o.error
      })
    end
    return transition(job, now, leaseCleared({
      state = step(job.state, "retry"),
      runAfter = runAfter,
      errorClass = o.errorClass,
      lastError = o.error
    }), stop("retried", o.errorClass, o.error))
  end
  if o.kind == "fail" then
    return transition(job, now, leaseCleared({
      state = step(job.state, "fail"),
      errorClass = o.errorClass,
      lastError = o.error
    }), stop("failed", o.errorClass, o.error))
  end
  if o.kind == "abandon" then
    local patch = leaseCleared({ state = step(job.state, "abandon"), abandonReason = o.reason })
    if o.errorClass ~= nil then
      patch.errorClass = o.errorClass
    end
    if o.error ~= nil then
      patch.lastError = o.error
    end
    return transition(job, now, patch, stop("abandoned", o.errorClass, o.error))
  end
  if o.kind == "throttle" then
    local runAfter = now + math.max(0, o.delayMs)
    if job.deadlineAt ~= nil and runAfter >= job.deadlineAt then
      return settleTransition(job, now, {
        kind = "abandon",
        reason = "deadline",
        errorClass = "rate_limited",
        error = o.error
      })
    end
    return transition(job, now, leaseCleared({
      state = step(job.state, "release"),
      runAfter = runAfter,
      attemptsBase = job.attemptsBase + 1,
      errorClass = "rate_limited",
      lastError = o.error
    }), stop("released", "rate_limited", o.error))
  end
  -- release
  return transition(job, now, leaseCleared({
    state = step(job.state, "release"),
    runAfter = now,
    attemptsBase = job.attemptsBase + 1
  }), stop("released"))
end

-- Protocol.cancelVerdict
local function cancelVerdict(job)
  if isTerminal(job.state) then
    return "AlreadyTerminal"
  end
  if job.state == "queued" then
    return "Abandon"
  end
  if job.cancelRequestedAt == nil then
    return "Request"
  end
  return "Unchanged"
end

-- Protocol.cancelTransition
local function cancelTransition(job, now, verdict)
  if verdict == "Abandon" then
    return transition(job, now, leaseCleared({ state = step(job.state, "cancel"), abandonReason = "cancelled" }))
  end
  return transition(job, now, { state = step(job.state, "cancel"), cancelRequestedAt = now })
end

-- Protocol.replayable; `filter` fields nil match anything.
local function replayable(job, filter)
  return job.state == "failed"
    and (filter.queue == nil or filter.queue == filter.ownQueue)
    and (filter.tenant == nil or job.tenant == filter.tenant)
    and (filter.errorClass == nil or job.errorClass == filter.errorClass)
    and (filter.type == nil or job.type == filter.type)
    and (filter.inputHash == nil or job.inputHash == filter.inputHash)
end

-- Protocol.replayTransition
local function replayTransition(job, now)
  return transition(job, now, leaseCleared({
    state = step(job.state, "replay"),
    runAfter = now,
    attemptsBase = job.attempts,
    abandonReason = NULL,
    cancelRequestedAt = NULL
  }))
end

-- Protocol.sweepVerdict: { tag = "Expired", reason } | { tag = "Overdue" } | nil
local function sweepVerdict(job, now)
  if job.state == "running" and job.leaseUntil ~= nil and job.leaseUntil < now then
    local reason = settleReason(job, now, nil)
    if reason == "budget" or reason == nil then
      reason = "requeue"
    end
    return { tag = "Expired", reason = reason }
  end
  if job.state == "queued" and job.deadlineAt ~= nil and job.deadlineAt <= now then
    return { tag = "Overdue" }
  end
  return nil
end

-- Protocol.sweepTransition
local function sweepTransition(job, now, verdict)
  if verdict.tag == "Overdue" then
    return transition(job, now, leaseCleared({ state = step(job.state, "abandon"), abandonReason = "deadline" }))
  end
  local stop = expiredEnd(job)
  if verdict.reason == "requeue" then
    return transition(job, now, leaseCleared({ state = step(job.state, "expire"), runAfter = now }), stop)
  end
  return settleBy(job, now, verdict.reason, true, stop)
end

-- Protocol.lastTouched
local function lastTouched(job, republishedAt)
  return math.max(job.updatedAt, republishedAt or job.updatedAt)
end

-- Protocol.isStale
local function isStale(job, republishedAt, now, republishAfterMs)
  return job.state == "queued"
    and job.runAfter <= now
    and (job.deadlineAt == nil or job.deadlineAt > now)
    and lastTouched(job, republishedAt) < now - republishAfterMs
end
