-- charging: the items of a charge (Store.charge), shared by charge and cycle: ARGV[from..to] in groups of 5 (job id,
-- call id, token, amount cents, settled "1"/"0"), each result appended to `out`. Runs with index writes sent at once,
-- as its own script always has (cycle sends what its earlier parts gathered first). Needs base, protocol and records.

local function chargeItems(now, from, to, out)
  for a = from, to, 5 do
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
end
