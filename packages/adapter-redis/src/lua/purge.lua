-- purge: delete finished jobs for good (RedisStore.purge): record, input and result, attempts, charges, index
-- entries, request key. Dead letters stay until they are replayed or purged this way.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: created-before ms, limit, then the states to purge (any of succeeded, abandoned, failed).
-- Returns: the purged ids (the caller deletes their routes, which live in other slots).
-- Picks: per state, the oldest first (`x:s:<state>`, by createdAt), created strictly before the given time.
-- Atomic: each job leaves every index and sum in the same script that deletes it.
-- @include base
-- @include protocol
-- @include records

local before = ARGV[1]
local left = tonumber(ARGV[2])
local purged = {}
for a = 3, #ARGV do
  local state = ARGV[a]
  if left <= 0 then
    break
  end
  if state == "succeeded" or state == "abandoned" or state == "failed" then
    local members = redis.call("ZRANGEBYSCORE", base .. K.state .. state, "-inf", "(" .. before, "LIMIT", 0, left)
    for _, member in ipairs(members) do
      local job = load(idOfMember(member))
      removeJob(job)
      purged[#purged + 1] = job.id
      left = left - 1
    end
  end
end
return purged
