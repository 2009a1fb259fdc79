-- submit: insert queued jobs (Store.submit).
-- KEYS[1]: the queue's meta hash; every other key is built from its `<prefix>:{<queue>}:` prefix (one slot).
-- ARGV: now ("" = server TIME), then 15 values per item: id, tenant (opt), type, version, request key (opt),
--       input hash, input (JSON text), input ref (opt), priority, delay ms, deadline (opt), budget (opt),
--       max attempts, trace id (opt), request fingerprint (opt). Optional strings are "-" or "+text"; optional numbers are "" for null.
-- Returns: { "constraint", id } when an item's id exists already or repeats in the batch (nothing written);
--          else { now, results... }, each { "Created" } | { "Existing", job } | { "KeyReused", jobId }. A created
--          job is Protocol.newJob of its item at `now`, which the caller builds itself from the item it sent: the
--          reply carries neither the record nor the input back.
-- Atomic: a script runs alone on its server, so the id check, the request-key lookups and the inserts see no
--         other writer; items apply in order, so an item sees the request key an earlier item took.
-- @include base
-- @include protocol
-- @include records

-- It reads records and request keys, never an index it writes: its index writes go out once per key at the end.
deferIndexes()
local now = storeNow(ARGV[1])
local count = (#ARGV - 1) / ITEM_ARITY

local items = {}
local seen = {}
for i = 0, count - 1 do
  local a = 1 + i * ITEM_ARITY
  local item = readItem(a)
  if seen[item.id] or redis.call("EXISTS", jobKey(item.id)) == 1 then
    return { "constraint", item.id }
  end
  seen[item.id] = true
  items[#items + 1] = item
end

local out = { fmt(now) }
for _, item in ipairs(items) do
  local field = nil
  local existing = nil
  if item.requestKey ~= nil then
    field = requestKeyField(item.tenant, item.requestKey)
    local holder = redis.call("HGET", base .. K.requestKeys, field)
    if holder then
      existing = load(holder)
    end
  end
  if existing ~= nil then
    if submitVerdict(existing, item) == "Existing" then
      out[#out + 1] = { "Existing", jobReply(existing) }
    else
      out[#out + 1] = { "KeyReused", existing.id }
    end
  else
    local seq = redis.call("HINCRBY", KEYS[1], "seq", 1)
    local job = newJob(item, now, seq)
    save(nil, job)
    redis.call("HSET", dataKey(job.id), "i", item.input)
    if field ~= nil then
      redis.call("HSET", base .. K.requestKeys, field, job.id)
    end
    touched(job)
    out[#out + 1] = { "Created" }
  end
end
publishWrites()
return out
