-- purge: delete finished jobs for good (RedisStore.purge): record, input and result, attempts, charges, index
-- entries, request key. Dead letters stay until they are replayed or purged this way.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: created-before ms, limit, then the states to purge (any of succeeded, abandoned, failed; others and repeats
-- are ignored).
-- Returns: the purged ids, in the order they were picked (the caller deletes their routes, which live in other
-- slots).
-- Picks: the rule of `purgeTargets` in @slowcall/testing's StoreModel: the queue's finished jobs in the states asked
-- for, created strictly before the given time, oldest first across those states, insertion order (the member's
-- counter) breaking ties, at most `limit`. Each state's index (`x:s:<state>`, by createdAt) gives its `limit`
-- oldest; their merge gives the oldest of all.
-- Atomic: each job leaves every index and sum in the same script that deletes it.
-- @include base
-- @include protocol
-- @include records

local before = ARGV[1]
local limit = tonumber(ARGV[2])
local picked = {}
local seen = {}
if limit > 0 then
  for a = 3, #ARGV do
    local state = ARGV[a]
    if (state == "succeeded" or state == "abandoned" or state == "failed") and not seen[state] then
      seen[state] = true
      local raw = redis.call("ZRANGEBYSCORE", base .. K.state .. state, "-inf", "(" .. before, "WITHSCORES", "LIMIT", 0,
        limit)
      for i = 1, #raw, 2 do
        picked[#picked + 1] = { raw[i], tonumber(raw[i + 1]) }
      end
    end
  end
end
-- Oldest first; on equal createdAt the member's fixed-width counter keeps insertion order.
table.sort(picked, function(a, b)
  if a[2] ~= b[2] then
    return a[2] < b[2]
  end
  return a[1] < b[1]
end)
local purged = {}
for i = 1, math.min(#picked, math.max(limit, 0)) do
  local job = load(idOfMember(picked[i][1]))
  removeJob(job)
  purged[#purged + 1] = job.id
end
flushCounts()
return purged
