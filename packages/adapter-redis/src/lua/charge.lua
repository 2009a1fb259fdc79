-- charge: record reservations and settlements in the ledger (Store.charge). Not fenced: the money was spent.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), then 5 values per item: job id, call id, token, amount cents, settled "1"/"0".
-- Returns: { now, results... }, each { "Charged", costCents } | { "NotFound" }
--          | { "BatchBudgetExceeded", costCents, batchId, batchCostCents, budgetCents }.
-- Atomic: the ledger row (keyed by call id) and the job's spend change in one script, so a call id counts
--         once however often it is sent and the spend is always the ledger's sum; a row of an attempt that
--         ended with an error class moves that class's cost sum in the same script. On an item of a batch,
--         Batch.chargeVerdict is decided in the same script against the batch as the earlier items left it: a
--         reservation of a new call id that the batch's budget cannot cover writes nothing.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local out = { fmt(now) }
for a = 2, #ARGV, 5 do
  local job = load(ARGV[a])
  if job == nil then
    out[#out + 1] = { "NotFound" }
  else
    local callId = ARGV[a + 1]
    local key = chargesKey(job.id)
    local raw = redis.call("HGET", key, callId)
    local existing = nil
    if raw then
      existing = decodeCharge(callId, raw)
    end
    local charge = {
      callId = callId,
      token = tonumber(ARGV[a + 2]),
      amountCents = tonumber(ARGV[a + 3]),
      settled = ARGV[a + 4] == "1"
    }
    -- Batch.chargeVerdict: a reservation past what is left of the batch's budget (reservations included).
    local refused = nil
    if existing == nil and not charge.settled and job.batchId ~= nil then
      local b = loadBatch(job.batchId)
      if b ~= nil and not budgetFits(b.budgetCents, b.costCents, charge.amountCents) then
        refused = b
      end
    end
    local result = nil
    if refused == nil then
      result = chargeStep(existing, charge, now)
    end
    if result ~= nil then
      local row = result.row
      if existing == nil then
        row.seq = redis.call("HLEN", key) + 1
        indexCharge(job, callId, row.createdAt)
      end
      redis.call("HSET", key, callId, encodeCharge(row))
      -- A row of an attempt that has ended with a class (a late settlement, a stale worker's call) moves its sum.
      local class = endedClass(job.id, row.token)
      if class ~= nil and result.delta ~= 0 then
        for _, k in ipairs(costKeys(job)) do
          addSum(k, class, 0, result.delta)
        end
      end
      local new = charged(job, result.delta, now)
      save(job, new)
      touched(new)
      job = new
    end
    if refused ~= nil then
      out[#out + 1] = {
        "BatchBudgetExceeded",
        fmt(job.costCents),
        refused.id,
        fmt(refused.costCents),
        fmt(refused.budgetCents)
      }
    else
      out[#out + 1] = { "Charged", fmt(job.costCents) }
    end
  end
end
publishWrites()
return out
