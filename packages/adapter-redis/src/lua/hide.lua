-- hide: move the moment queued jobs may be delivered (RedisTransport publish with a delay, extend, defer).
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), mode, then 3 values per item: job id, receive count (the receipt; "" for
--       publish), ms.
--       mode "publish": the job may be delivered no earlier than now + ms (a hiding that ends later is kept: a
--       publish never brings a hidden job forward); "hide": the delivery of that receipt is hidden until now + ms
--       (a superseded receipt changes nothing).
-- Returns: { now, "1"/"0" per item: whether it changed anything }.
-- Atomic: the receipt check and the mark are one script. Only queued jobs are touched: a claimed job is hidden
--         by its lease, and a job queued again is deliverable again whatever an old delivery asked.
-- @include base
-- @include protocol
-- @include records

local now = storeNow(ARGV[1])
local publish = ARGV[2] == "publish"
local out = { fmt(now) }
for a = 3, #ARGV, 3 do
  local job = load(ARGV[a])
  local changed = "0"
  if job ~= nil and job.state == "queued" then
    local at = now + math.max(0, tonumber(ARGV[a + 2]))
    local marked = nil
    if publish then
      if job.visibleAt == nil or job.visibleAt < at then
        marked = copy(job)
        marked.visibleAt = at
      end
    elseif (job.receiveCount or 0) == tonumber(ARGV[a + 1]) then
      marked = copy(job)
      marked.visibleAt = at
    end
    if marked ~= nil then
      save(job, marked)
      changed = "1"
    end
  end
  out[#out + 1] = changed
end
return out
