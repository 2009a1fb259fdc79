-- base: what every script shares. Numbers leave as "%.17g" text, which reads back as the same double in
-- JavaScript (a Lua number returned bare would be cut to an integer). The queue's keys are built from the
-- prefix of KEYS[1] (the queue's meta hash, `<prefix>:{<queue>}:m`) and the suffixes of `K`, so every key a
-- script touches carries the queue's hash tag and lives in the script's slot. `NULL` marks a field a patch
-- clears (a Lua table cannot hold nil).

local base = string.sub(KEYS[1], 1, #KEYS[1] - #K.meta)
local NULL = {}

local floor = math.floor

-- An integral value of fewer than 16 digits goes through "%d", which prints the same text as "%.17g" (no exponent
-- below 1e17) at a small part of its cost: "%.17g" converts through multi-precision arithmetic, and a job's write
-- formats dozens of such numbers (times in ms, counts, tokens). Not -0, which "%d" would print as "0".
local function fmt(x)
  if x == floor(x) and x > -1e15 and x < 1e15 and (x ~= 0 or 1 / x > 0) then
    return string.format("%d", x)
  end
  return string.format("%.17g", x)
end

-- Store time: the caller's override (tests), else the server's clock in whole epoch ms (the resolution of the
-- Store contract and the memory store's Clock). Whole, because the index scores are times taken from it: Redis keeps
-- a small sorted set as a listpack, which stores a score written as an integer as an integer, while a fractional
-- score is stored as text and parsed again on every comparison (docs/adapters/redis.md, "What one job costs the
-- server"). The same rule as `serverNow` in context.ts and `storeNow` in limits.lua.
local function storeNow(arg)
  if arg ~= nil and arg ~= "" then
    return tonumber(arg)
  end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A string inside a key name: length first, so no two values give the same name.
local function enc(s)
  return #s .. ":" .. s
end

-- Optional values in ARGV: "-" is null, "+" followed by the text is a string; "" is a null number.
local function optString(s)
  if s == "-" then
    return nil
  end
  return string.sub(s, 2)
end

local function optNumber(s)
  if s == "" then
    return nil
  end
  return tonumber(s)
end

local function jobKey(id)
  return base .. K.job .. id
end

local function dataKey(id)
  return base .. K.data .. id
end

local function attemptsKey(id)
  return base .. K.attempts .. id
end

local function chargesKey(id)
  return base .. K.charges .. id
end

-- The sorted-set member of a job: its insertion counter (12 digits) then its id, so equal scores keep
-- insertion order.
local function memberOf(job)
  return string.format("%012d", job.seq) .. job.id
end

local function idOfMember(member)
  return string.sub(member, 13)
end

-- The job record of an HGETALL reply (field, value, field, value, ...), or nil when the reply is empty.
local function decode(id, raw)
  if #raw == 0 then
    return nil
  end
  local job = { id = id }
  for i = 1, #raw, 2 do
    local short = raw[i]
    local name = NAME_OF[short]
    if name ~= nil then
      if NUMERIC[short] then
        job[name] = tonumber(raw[i + 1])
      else
        job[name] = raw[i + 1]
      end
    end
  end
  return job
end

-- The job record as the hash holds it, or nil.
local function load(id)
  return decode(id, redis.call("HGETALL", jobKey(id)))
end

-- Part of the job record: only the fields named by `shorts` (hash field names, "st" among them), or nil when
-- there is no such job. Enough for a transition that reads and changes no other field: its writes and index
-- moves are computed from these alone (`save` compares old and new, and both lack the same fields).
local function loadFields(id, shorts)
  local raw = redis.call("HMGET", jobKey(id), unpack(shorts))
  local job = { id = id }
  for i, short in ipairs(shorts) do
    local value = raw[i]
    if value then
      if NUMERIC[short] then
        job[NAME_OF[short]] = tonumber(value)
      else
        job[NAME_OF[short]] = value
      end
    end
  end
  if job.state == nil then
    return nil
  end
  return job
end

-- The running jobs, for the readers of a state: no state set holds them (a running job is in the lease set
-- `x:l` alone, so a claim and a settle move it in one set), so they are read from the lease set with each job's
-- createdAt, and its tenant when `tenant` is given (then only that tenant's): linear in the running jobs, which
-- the fleet's concurrency bounds. Returns { member, createdAt } in ascending (createdAt, member) order.
local function runningJobs(tenant)
  local out = {}
  for _, member in ipairs(redis.call("ZRANGE", base .. K.lease, 0, -1)) do
    local f = redis.call("HMGET", jobKey(idOfMember(member)), "cr", "tn")
    if f[1] and (tenant == nil or f[2] == tenant) then
      out[#out + 1] = { member, tonumber(f[1]) }
    end
  end
  table.sort(out, function(a, b)
    if a[2] ~= b[2] then
      return a[2] < b[2]
    end
    return a[1] < b[1]
  end)
  return out
end

-- How many jobs are running (of `tenant`, when given): the lease set's size, or a read of each one's tenant.
local function runningCount(tenant)
  if tenant == nil then
    return redis.call("ZCARD", base .. K.lease)
  end
  local n = 0
  for _, member in ipairs(redis.call("ZRANGE", base .. K.lease, 0, -1)) do
    if redis.call("HGET", jobKey(idOfMember(member)), "tn") == tenant then
      n = n + 1
    end
  end
  return n
end

local function copy(job)
  local out = {}
  for k, v in pairs(job) do
    out[k] = v
  end
  return out
end

-- The hash field of each record field, built on first use.
local SHORT_OF = nil

-- Writes the fields that differ between `old` (nil for a new job) and `new` in one HSET and one HDEL. `names`
-- (optional) lists the only fields that may differ, so the others are not compared.
local function storeFields(old, new, names)
  local set = {}
  local del = {}
  local shorts = FIELD_SHORTS
  if names ~= nil then
    if SHORT_OF == nil then
      SHORT_OF = {}
      for i, name in ipairs(FIELD_NAMES) do
        SHORT_OF[name] = FIELD_SHORTS[i]
      end
    end
    shorts = {}
    for i, name in ipairs(names) do
      shorts[i] = SHORT_OF[name]
    end
  else
    names = FIELD_NAMES
  end
  for i, name in ipairs(names) do
    local value = new[name]
    if old == nil or value ~= old[name] then
      local short = shorts[i]
      if value == nil then
        if old ~= nil then
          del[#del + 1] = short
        end
      else
        set[#set + 1] = short
        if NUMERIC[short] then
          set[#set + 1] = fmt(value)
        else
          set[#set + 1] = value
        end
      end
    end
  end
  if #set > 0 then
    redis.call("HSET", jobKey(new.id), unpack(set))
  end
  if #del > 0 then
    redis.call("HDEL", jobKey(new.id), unpack(del))
  end
end

-- The reply form of a job: its id, the fields of REPLY (text or false for null), then input and result (JSON
-- text, or false when absent or expired). With `sentResult`, the result is the one the caller sent in this script:
-- its slot is 1 and the caller fills it in, so a result crosses the wire once.
local function jobReply(job, sentResult)
  local out = { job.id }
  for i, name in ipairs(REPLY) do
    local value = job[name]
    if value == nil then
      out[i + 1] = false
    elseif type(value) == "number" then
      out[i + 1] = fmt(value)
    else
      out[i + 1] = value
    end
  end
  if sentResult then
    out[#REPLY + 2] = redis.call("HGET", dataKey(job.id), "i")
    out[#REPLY + 3] = 1
    return out
  end
  local data = redis.call("HMGET", dataKey(job.id), "i", "r")
  out[#REPLY + 2] = data[1]
  out[#REPLY + 3] = data[2]
  return out
end
