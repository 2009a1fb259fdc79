-- settle: end attempts under their tokens (Store.settle): complete, retry, fail, abandon, release or throttle.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), then 8 values per item: job id, token, kind
--       (complete | retry | fail | abandon | release | throttle), result JSON (complete), delay ms (retry, throttle),
--       error class (opt),
--       error (opt), abandon reason (abandon; "" otherwise). Optional strings are "-" or "+text".
-- Returns: { now, results... }, each { "Settled", job } | { "LeaseLost", currentToken | false, state | false }. A
--          completed job's result is the one its item sent: the reply's result slot is then 1 (see jobReply).
-- Atomic: the fence, the record, the attempt row and the indexes change in one script.
-- @include base
-- @include protocol
-- @include records
-- @include fenced

deferIndexes()
local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local out = { fmt(now) }
for a = 3, #ARGV, 8 do
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
    out[#out + 1] = { "Settled", jobReply(new, tr.result ~= nil and tr.result == outcome.result) }
  end
end
publishWrites()
return out
