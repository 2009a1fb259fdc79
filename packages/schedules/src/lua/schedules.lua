-- schedules: every verb of the Redis ScheduleStore, an atomic version of `ScheduleStore.Rules`.
-- KEYS[1]: `<prefix>:{%schedules}:ids`, the set of schedule ids; KEYS[2]: `<prefix>:{%schedules}:s:`, the prefix of
-- each schedule's hash (both carry the `{%schedules}` hash tag: one slot, so a Cluster runs every verb in one node).
-- ARGV[1]: the verb; ARGV[2]: store time in ms ("" = the server's TIME); then the verb's arguments.
-- Hash fields: d the definition (JSON), p "1" when paused, c the cursor (ms), j the last job id (absent: none),
-- ca the creation time (ms). Times are kept as the decimal strings they were written as, so they read back exactly.
-- Returns { now, ... }: a record is { id, d, p, c, j or false, ca }.

local verb = ARGV[1]
local now
if ARGV[2] ~= "" then
  now = ARGV[2]
else
  local t = redis.call("TIME")
  local us = tonumber(t[2])
  now = tostring(tonumber(t[1]) * 1000 + math.floor(us / 1000)) .. "." .. string.format("%03d", us % 1000)
end

local function key(id)
  return KEYS[2] .. id
end

local function record(id)
  local h = redis.call("HMGET", key(id), "d", "p", "c", "j", "ca")
  if not h[1] then
    return false
  end
  return { id, h[1], h[2], h[3], h[4] or false, h[5] }
end

if verb == "upsert" then
  local ids = {}
  for a = 3, #ARGV, 2 do
    local id = ARGV[a]
    local k = key(id)
    if redis.call("EXISTS", k) == 1 then
      redis.call("HSET", k, "d", ARGV[a + 1])
    else
      redis.call("HSET", k, "d", ARGV[a + 1], "p", "0", "c", now, "ca", now)
      redis.call("SADD", KEYS[1], id)
    end
    ids[#ids + 1] = id
  end
  local out = { now }
  for i = 1, #ids do
    out[#out + 1] = record(ids[i])
  end
  return out
elseif verb == "list" then
  local out = { now }
  for _, id in ipairs(redis.call("SMEMBERS", KEYS[1])) do
    local r = record(id)
    if r then
      out[#out + 1] = r
    end
  end
  return out
elseif verb == "get" then
  return { now, record(ARGV[3]) }
elseif verb == "pause" then
  local id = ARGV[3]
  if redis.call("EXISTS", key(id)) == 1 then
    redis.call("HSET", key(id), "p", "1")
  end
  return { now, record(id) }
elseif verb == "resume" then
  local id = ARGV[3]
  local k = key(id)
  if redis.call("HGET", k, "p") == "1" then
    local cursor = redis.call("HGET", k, "c")
    if tonumber(now) > tonumber(cursor) then
      cursor = now
    end
    redis.call("HSET", k, "p", "0", "c", cursor)
  end
  return { now, record(id) }
elseif verb == "advance" then
  local id, to, job = ARGV[3], ARGV[4], ARGV[5]
  local k = key(id)
  local cursor = redis.call("HGET", k, "c")
  if not cursor then
    return { now, false, "0" }
  end
  if tonumber(to) > tonumber(cursor) then
    redis.call("HSET", k, "c", to)
    if job ~= "" then
      redis.call("HSET", k, "j", job)
    end
    return { now, record(id), "1" }
  end
  return { now, record(id), "0" }
elseif verb == "remove" then
  local id = ARGV[3]
  redis.call("SREM", KEYS[1], id)
  return { now, redis.call("DEL", key(id)) }
end
return redis.error_reply("unknown verb " .. tostring(verb))
