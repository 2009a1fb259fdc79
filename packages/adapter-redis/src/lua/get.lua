#!lua flags=no-writes
-- get: read job records (Query.get).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: job ids.
-- Returns: one job (or false) per id.
-- Atomic: the record and its input and result are read together.
-- @include base

local out = {}
for i = 1, #ARGV do
  local job = load(ARGV[i])
  if job == nil then
    out[i] = false
  else
    out[i] = jobReply(job)
  end
end
return out
