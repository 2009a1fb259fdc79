-- records: storing a job and everything kept beside it. `save(old, new)` writes the record's changed fields
-- and moves the job between the secondary indexes (sorted sets and sums, see keys.ts) by comparing where the
-- old and the new record belong, so no write can forget an index. `apply` stores a protocol transition: the
-- record, the attempt row it ends or starts, the failure mark, the result, the retention of the job's data.
-- Ledger and attempt rows are JSON arrays of text (numbers as "%.17g" text, so no precision is lost).

-- @include protocol

-- The field of a request key in `rk`: tenant (or its absence) and key, unambiguous.
local function requestKeyField(tenant, requestKey)
  if tenant == nil then
    return "n" .. enc(requestKey)
  end
  return "t" .. enc(tenant) .. enc(requestKey)
end

-- The (type, version) pair of a job in the waiting indexes' names: `<version>:<type>` (a version has no colon).
local function waitingPair(job)
  return fmt(job.version) .. ":" .. job.type
end

-- The field of a failed job's dead-letter group, in the sums and in the group's job index.
local function groupField(job)
  if job.errorClass == nil then
    return "n:" .. job.inputHash
  end
  return "c" .. job.errorClass .. ":" .. job.inputHash
end

-- Whether the queue keeps the fair-claim indexes (see includes/fairness.lua): read once per script.
local fairKept = nil
local function fairIndexed()
  if fairKept == nil then
    fairKept = redis.call("HGET", KEYS[1], "fx") == "1"
  end
  return fairKept
end

-- Where a job belongs: index key -> score. A running job is in the lease set only (no state set: a claim and its
-- settle move a job in and out of the lease set and nothing else; see `runningJobs` for its readers).
local function entries(job)
  local e = {}
  local t = job.tenant
  local created = job.createdAt
  local state = job.state
  if state ~= "running" then
    e[base .. K.state .. state] = created
    if t ~= nil then
      e[base .. K.tenantState .. state .. ":" .. enc(t)] = created
    end
  end
  if job.requestKey ~= nil then
    e[base .. K.keyed .. enc(job.requestKey)] = created
  end
  if state == "queued" then
    local p = fmt(job.priority)
    e[base .. K.ready .. p] = job.runAfter
    local w = waitingPair(job)
    e[base .. K.waiting .. w] = job.runAfter
    if t ~= nil then
      e[base .. K.tenantReady .. p .. ":" .. enc(t)] = job.runAfter
      e[base .. K.tenantWaiting .. enc(t) .. w] = job.runAfter
    elseif fairIndexed() then
      e[base .. K.noTenantReady .. p] = job.runAfter
    end
    e[base .. K.visible .. p] = math.max(job.runAfter, job.visibleAt or job.runAfter)
    if job.deadlineAt ~= nil then
      e[base .. K.deadline] = job.deadlineAt
    end
    e[base .. K.touch] = lastTouched(job, job.republishedAt)
  elseif state == "running" then
    if job.leaseUntil ~= nil then
      e[base .. K.lease] = job.leaseUntil
    end
  elseif state == "failed" then
    e[base .. K.dead] = job.updatedAt
    if t ~= nil then
      e[base .. K.tenantDead .. enc(t)] = job.updatedAt
    end
    -- The group's jobs by failure time (a record without the mark, stored before it was kept, by its last write).
    local field = groupField(job)
    local failedAt = job.failedAt or job.updatedAt
    e[base .. K.groupJobs .. field] = failedAt
    e[base .. K.typeGroupJobs .. enc(job.type) .. field] = failedAt
    if t ~= nil then
      e[base .. K.tenantGroupJobs .. enc(t) .. field] = failedAt
      e[base .. K.tenantTypeGroupJobs .. enc(t) .. enc(job.type) .. field] = failedAt
    end
    if job.failedAt ~= nil then
      e[base .. K.failed] = job.failedAt
      if t ~= nil then
        e[base .. K.tenantFailed .. enc(t)] = job.failedAt
      end
    end
  end
  return e
end

-- A "count|sum" cell of a sums hash moved by one job of `cents`; the cell goes when its count reaches 0.
local function addSum(key, field, count, cents)
  local cell = redis.call("HGET", key, field)
  local n, sum = 0, 0
  if cell then
    local bar = string.find(cell, "|", 1, true)
    n = tonumber(string.sub(cell, 1, bar - 1))
    sum = tonumber(string.sub(cell, bar + 1))
  end
  n = n + count
  if n <= 0 then
    redis.call("HDEL", key, field)
  else
    redis.call("HSET", key, field, n .. "|" .. fmt(sum + cents))
  end
end

-- The dead-letter group sums a failed job counts in (count and cost per error class and input hash).
local function groupKeys(job)
  local keys = { base .. K.groups, base .. K.typeGroups .. enc(job.type) }
  if job.tenant ~= nil then
    keys[3] = base .. K.tenantGroups .. enc(job.tenant)
    keys[4] = base .. K.tenantTypeGroups .. enc(job.tenant) .. enc(job.type)
  end
  return keys
end

-- The error-class cost sums an ended attempt counts in (count of attempts and their ledger rows per class).
local function costKeys(job)
  local keys = { base .. K.costs }
  if job.tenant ~= nil then
    keys[2] = base .. K.tenantCosts .. enc(job.tenant)
  end
  return keys
end

local function moveSums(old, new)
  local oldFailed = old ~= nil and old.state == "failed"
  local newFailed = new ~= nil and new.state == "failed"
  if oldFailed ~= newFailed or (oldFailed and (old.errorClass ~= new.errorClass or old.costCents ~= new.costCents)) then
    if oldFailed then
      for _, key in ipairs(groupKeys(old)) do
        addSum(key, groupField(old), -1, -old.costCents)
      end
    end
    if newFailed then
      for _, key in ipairs(groupKeys(new)) do
        addSum(key, groupField(new), 1, new.costCents)
      end
    end
  end
end

-- The job counts per (state, type) (`Q n`, see keys.ts), as deltas by state, type and tenant (false for none): a
-- script sends each touched field once, at its end (`flushCounts`), since no script reads a count it writes. A
-- job's type and tenant never change, so only a change of state (or an insert or a delete) moves it. The field
-- names are built at the flush, once per script and cell, not once per job.
local countDeltas = nil

local function countJob(job, d)
  countDeltas = countDeltas or {}
  local byType = countDeltas[job.state]
  if byType == nil then
    byType = {}
    countDeltas[job.state] = byType
  end
  local byTenant = byType[job.type]
  if byTenant == nil then
    byTenant = {}
    byType[job.type] = byTenant
  end
  local t = job.tenant or false
  byTenant[t] = (byTenant[t] or 0) + d
end

local function moveCounts(old, new)
  if old ~= nil and new ~= nil and old.state == new.state then
    return
  end
  if old ~= nil then
    countJob(old, -1)
  end
  if new ~= nil then
    countJob(new, 1)
  end
end

-- Sends the gathered count deltas: one HINCRBY per field that moved, and a field that reached 0 is deleted.
local function flushCounts()
  if countDeltas == nil then
    return
  end
  local key = base .. K.counts
  local function send(field, d)
    if d ~= 0 and redis.call("HINCRBY", key, field, d) == 0 then
      redis.call("HDEL", key, field)
    end
  end
  for state, byType in pairs(countDeltas) do
    for jobType, byTenant in pairs(byType) do
      local total = state .. ":" .. enc(jobType)
      local sum = 0
      for t, d in pairs(byTenant) do
        sum = sum + d
        if t == false then
          send(total .. "n", d)
        else
          send(total .. "t" .. enc(t), d)
        end
      end
      send(total, sum)
    end
  end
  countDeltas = nil
end

-- Sorted-set writes a script gathers instead of sending them per job (`deferIndexes`), nil when it sends them at
-- once. `zadds[key][member]` is a score and `zrems[key][member]` true; a later move of a member replaces an earlier
-- one of the same key, so the flush leaves every set as the writes in order would. `prioMoves` and `waitMoves` are
-- the priorities and waiting pairs whose queued jobs changed, each with whether a job joined and whether one left.
local deferred = nil

-- Makes this script gather its sorted-set writes and the emptiness checks that follow them, for `flushIndexes`
-- to send as one variadic ZADD and one ZREM per key, and one check per touched priority or pair. Only for a
-- script that reads no index it writes before the flush (submit, claim, claimNext, claimNextFair, heartbeat,
-- settle). A script stopped by an error (a defect: Redis keeps what a script wrote before it failed) leaves these
-- moves unsent for every job it wrote, where before it left them unsent for the job it was writing.
local function deferIndexes()
  deferred = { zadds = {}, zrems = {}, prioMoves = {}, waitMoves = {} }
end

local function zadd(key, score, member)
  if deferred == nil then
    redis.call("ZADD", key, fmt(score), member)
    return
  end
  local rems = deferred.zrems[key]
  if rems ~= nil then
    rems[member] = nil
  end
  local adds = deferred.zadds[key]
  if adds == nil then
    adds = {}
    deferred.zadds[key] = adds
  end
  adds[member] = score
end

local function zrem(key, member)
  if deferred == nil then
    redis.call("ZREM", key, member)
    return
  end
  local adds = deferred.zadds[key]
  if adds ~= nil then
    adds[member] = nil
  end
  local rems = deferred.zrems[key]
  if rems == nil then
    rems = {}
    deferred.zrems[key] = rems
  end
  rems[member] = true
end

local function mark(m, joined)
  if joined then
    m.joined = true
  else
    m.left = true
  end
end

-- Notes that a job of priority (or waiting pair) `field` and tenant `t` joined or left the queued jobs: per field,
-- and per tenant of it (`none` for no tenant).
local function noteMove(moves, field, t, priority, joined)
  local m = moves[field]
  if m == nil then
    m = { priority = priority, joined = false, left = false, tenants = {}, none = nil }
    moves[field] = m
  end
  mark(m, joined)
  local tm
  if t == nil then
    m.none = m.none or { joined = false, left = false }
    tm = m.none
  else
    tm = m.tenants[t] or { joined = false, left = false }
    m.tenants[t] = tm
  end
  mark(tm, joined)
end

-- The priorities with queued jobs (for claimNext, receive and stats): a priority joins when a job of it
-- becomes queued and leaves when its last queued job leaves.
local function movePriorities(old, new)
  local wasQueued = old ~= nil and old.state == "queued"
  local isQueued = new ~= nil and new.state == "queued"
  if wasQueued == isQueued then
    return
  end
  local job = new or old
  local p = fmt(job.priority)
  local t = job.tenant
  if deferred ~= nil then
    noteMove(deferred.prioMoves, p, t, job.priority, isQueued)
    return
  end
  if isQueued then
    redis.call("ZADD", base .. K.prios, job.priority, p)
    if t ~= nil then
      redis.call("ZADD", base .. K.tenantPrios .. enc(t), job.priority, p)
    end
  else
    if redis.call("EXISTS", base .. K.ready .. p) == 0 then
      redis.call("ZREM", base .. K.prios, p)
    end
    if t ~= nil and redis.call("EXISTS", base .. K.tenantReady .. p .. ":" .. enc(t)) == 0 then
      redis.call("ZREM", base .. K.tenantPrios .. enc(t), p)
    end
  end
  if fairIndexed() then
    -- The fair-claim tenant set and the no-tenant priorities, kept like the priorities above.
    local code = "n"
    local prios = base .. K.noTenantPrios
    if t ~= nil then
      code = "t" .. t
      prios = base .. K.tenantPrios .. enc(t)
    end
    if isQueued then
      redis.call("SADD", base .. K.fairTenants, code)
      if t == nil then
        redis.call("ZADD", prios, job.priority, p)
      end
    else
      if t == nil and redis.call("EXISTS", base .. K.noTenantReady .. p) == 0 then
        redis.call("ZREM", prios, p)
      end
      if redis.call("EXISTS", prios) == 0 then
        redis.call("SREM", base .. K.fairTenants, code)
      end
    end
  end
end

-- The (type, version) pairs with queued jobs (for stats' waiting groups), kept like the priorities.
local function moveWaiting(old, new)
  local wasQueued = old ~= nil and old.state == "queued"
  local isQueued = new ~= nil and new.state == "queued"
  if wasQueued == isQueued then
    return
  end
  local job = new or old
  local w = waitingPair(job)
  local t = job.tenant
  if deferred ~= nil then
    noteMove(deferred.waitMoves, w, t, nil, isQueued)
    return
  end
  if isQueued then
    redis.call("SADD", base .. K.waitingTypes, w)
    if t ~= nil then
      redis.call("SADD", base .. K.tenantWaitingTypes .. enc(t), w)
    end
  else
    if redis.call("EXISTS", base .. K.waiting .. w) == 0 then
      redis.call("SREM", base .. K.waitingTypes, w)
    end
    if t ~= nil and redis.call("EXISTS", base .. K.tenantWaiting .. enc(t) .. w) == 0 then
      redis.call("SREM", base .. K.tenantWaitingTypes .. enc(t), w)
    end
  end
end

-- After a flush: `member` of the index `set` (a sorted set when `score` is given, else a set) stays exactly when
-- `source` has members, given that jobs `joined` and/or `left` the source in this script. The same rule as
-- movePriorities and moveWaiting above, applied once to the sets as the script leaves them.
local function follow(joined, left, source, set, score, member)
  if left and redis.call("EXISTS", source) == 0 then
    if score ~= nil then
      redis.call("ZREM", set, member)
    else
      redis.call("SREM", set, member)
    end
  elseif joined then
    if score ~= nil then
      redis.call("ZADD", set, score, member)
    else
      redis.call("SADD", set, member)
    end
  end
end

-- One command per chunk of `args` (so `unpack` never overflows Lua's stack), `per` arguments per item.
local function variadic(cmd, key, args, per)
  local chunk = 500 * per
  for from = 1, #args, chunk do
    redis.call(cmd, key, unpack(args, from, math.min(from + chunk - 1, #args)))
  end
end

-- Sends what `deferIndexes` gathered: one ZREM and one ZADD per touched key, then the priorities, waiting pairs
-- and fair-claim tenants that follow from them, each checked once. Nothing when the script sends at once.
local function flushIndexes()
  local d = deferred
  if d == nil then
    return
  end
  deferred = nil
  for key, rems in pairs(d.zrems) do
    local members = {}
    for member, _ in pairs(rems) do
      members[#members + 1] = member
    end
    variadic("ZREM", key, members, 1)
  end
  for key, adds in pairs(d.zadds) do
    local args = {}
    for member, score in pairs(adds) do
      args[#args + 1] = fmt(score)
      args[#args + 1] = member
    end
    variadic("ZADD", key, args, 2)
  end
  local fair = next(d.prioMoves) ~= nil and fairIndexed()
  local codes = {}
  local function noteCode(code, prios, tm)
    local c = codes[code] or { joined = false, left = false, prios = prios }
    codes[code] = c
    c.joined = c.joined or tm.joined
    c.left = c.left or tm.left
  end
  for p, m in pairs(d.prioMoves) do
    follow(m.joined, m.left, base .. K.ready .. p, base .. K.prios, m.priority, p)
    for t, tm in pairs(m.tenants) do
      local prios = base .. K.tenantPrios .. enc(t)
      follow(tm.joined, tm.left, base .. K.tenantReady .. p .. ":" .. enc(t), prios, m.priority, p)
      if fair then
        noteCode("t" .. t, prios, tm)
      end
    end
    if fair and m.none ~= nil then
      follow(m.none.joined, m.none.left, base .. K.noTenantReady .. p, base .. K.noTenantPrios, m.priority, p)
      noteCode("n", base .. K.noTenantPrios, m.none)
    end
  end
  for code, c in pairs(codes) do
    follow(c.joined, c.left, c.prios, base .. K.fairTenants, nil, code)
  end
  for w, m in pairs(d.waitMoves) do
    follow(m.joined, m.left, base .. K.waiting .. w, base .. K.waitingTypes, nil, w)
    for t, tm in pairs(m.tenants) do
      follow(tm.joined, tm.left, base .. K.tenantWaiting .. enc(t) .. w, base .. K.tenantWaitingTypes .. enc(t), nil, w)
    end
  end
end

-- The ledger indexes (for stats' spend groups): a row joins when its call is first recorded, by the time the
-- call started, and leaves with its job.
local function ledgerMember(id, callId)
  return enc(id) .. callId
end

local function indexCharge(job, callId, createdAt)
  local member = ledgerMember(job.id, callId)
  redis.call("ZADD", base .. K.ledger, createdAt, member)
  if job.tenant ~= nil then
    redis.call("ZADD", base .. K.tenantLedger .. enc(job.tenant), createdAt, member)
  end
end

local function unindexCharges(job)
  local callIds = redis.call("HKEYS", chargesKey(job.id))
  -- In chunks: `unpack` of a long table would overflow Lua's stack.
  for from = 1, #callIds, 500 do
    local members = {}
    for i = from, math.min(from + 499, #callIds) do
      members[#members + 1] = ledgerMember(job.id, callIds[i])
    end
    redis.call("ZREM", base .. K.ledger, unpack(members))
    if job.tenant ~= nil then
      redis.call("ZREM", base .. K.tenantLedger .. enc(job.tenant), unpack(members))
    end
  end
end

-- The batch write that goes with a write to a batch item (defined below, after `touched`).
local batchWrite

-- Writes `new` (a record, never nil) over `old` (nil for a new job) with every index and sum kept; a write to an
-- item of a batch writes the batch too (`batchWrite`). `names` (optional) lists the only record fields that may
-- differ (see storeFields).
local function save(old, new, names)
  storeFields(old, new, names)
  if old ~= nil and new.batchId ~= nil then
    batchWrite(old, new)
  end
  local member = memberOf(new)
  local before = {}
  if old ~= nil then
    before = entries(old)
  end
  local after = entries(new)
  for key, _ in pairs(before) do
    if after[key] == nil then
      zrem(key, member)
    end
  end
  for key, score in pairs(after) do
    if before[key] ~= score then
      zadd(key, score, member)
    end
  end
  movePriorities(old, new)
  moveWaiting(old, new)
  moveSums(old, new)
  moveCounts(old, new)
  -- The first job of a new queue: its counts start complete (see keys.ts, `nc`).
  if old == nil and new.seq == 1 then
    redis.call("HSET", KEYS[1], "nc", "1")
  end
end

-- Every job a script wrote, for the one event message it publishes at the end.
local written = {}
local wokeQueue = false

local function touched(job)
  written[#written + 1] = job.id
  if job.state == "queued" then
    wokeQueue = true
  end
end

-- Batches (Batch.ts): the record in `Q b:<id>`, its items' ids in landing order in `Q bi:<id>`.
local function batchKey(id)
  return base .. K.batch .. id
end

local function batchItemsKey(id)
  return base .. K.batchItems .. id
end

-- The batch record as its hash holds it, or nil.
local function loadBatch(id)
  local raw = redis.call("HGETALL", batchKey(id))
  if #raw == 0 then
    return nil
  end
  local b = { id = id }
  for i = 1, #raw, 2 do
    local name = BATCH_NAME_OF[raw[i]]
    if name ~= nil then
      if BATCH_NUMERIC[raw[i]] then
        b[name] = tonumber(raw[i + 1])
      else
        b[name] = raw[i + 1]
      end
    end
  end
  return b
end

local function storeBatch(b)
  local set = {}
  local del = {}
  for i, name in ipairs(BATCH_NAMES) do
    local short = BATCH_SHORTS[i]
    local value = b[name]
    if value == nil then
      del[#del + 1] = short
    else
      set[#set + 1] = short
      if type(value) == "number" then
        set[#set + 1] = fmt(value)
      else
        set[#set + 1] = value
      end
    end
  end
  redis.call("HSET", batchKey(b.id), unpack(set))
  if #del > 0 then
    redis.call("HDEL", batchKey(b.id), unpack(del))
  end
end

-- The reply form of a batch: its id, then the fields of BATCH_NAMES (text, false for null).
local function batchReply(b)
  local out = { b.id }
  for i, name in ipairs(BATCH_NAMES) do
    local value = b[name]
    if value == nil then
      out[i + 1] = false
    elseif type(value) == "number" then
      out[i + 1] = fmt(value)
    else
      out[i + 1] = value
    end
  end
  return out
end

local function jsonOpt(v)
  if v == nil or v == cjson.null then
    return nil
  end
  return v
end

-- Batch.callbackItem then the insert of a submit: the callback's job, queued at `at`, under the batch's tenant and
-- the request key `batch:<id>:<kind>` (a key that names a job already inserts nothing).
local function insertCallback(b, kind, spec, at)
  local c = cjson.decode(spec)
  local item = {
    id = c.id,
    tenant = b.tenant,
    type = c.type,
    version = c.version,
    requestKey = "batch:" .. b.id .. ":" .. kind,
    inputHash = c.inputHash,
    inputRef = jsonOpt(c.inputRef),
    priority = jsonOpt(c.priority),
    delayMs = jsonOpt(c.delayMs),
    deadlineAt = jsonOpt(c.deadlineAt),
    budgetCents = jsonOpt(c.budgetCents),
    maxAttempts = c.maxAttempts,
    traceId = jsonOpt(c.traceId),
    fingerprint = jsonOpt(c.fingerprint)
  }
  local field = requestKeyField(item.tenant, item.requestKey)
  if redis.call("HEXISTS", base .. K.requestKeys, field) == 1 then
    return
  end
  local seq = redis.call("HINCRBY", KEYS[1], "seq", 1)
  local job = newJob(item, at, seq)
  save(nil, job)
  redis.call("HSET", dataKey(job.id), "i", c.input)
  redis.call("HSET", base .. K.requestKeys, field, job.id)
  touched(job)
end

-- Batch.isComplete
local function batchComplete(b)
  return b.added == b.size and b.queued == 0 and b.running == 0
end

-- Batch.finish, on `b` in place (the caller stores it), its callbacks inserted.
local function finishBatch(b, now)
  local complete = batchComplete(b)
  if complete == (b.finishedAt ~= nil) then
    return
  end
  if not complete then
    b.finishedAt = nil
    b.updatedAt = math.max(b.updatedAt, now)
    return
  end
  local finishedAt = math.max(b.updatedAt, now)
  local calls = {}
  if b.onComplete ~= nil and b.onCompleteJobId == nil then
    calls[#calls + 1] = { "onComplete", b.onComplete }
    b.onCompleteJobId = cjson.decode(b.onComplete).id
  end
  if b.onSuccess ~= nil and b.onSuccessJobId == nil and b.failed == 0 and b.abandoned == 0 then
    calls[#calls + 1] = { "onSuccess", b.onSuccess }
    b.onSuccessJobId = cjson.decode(b.onSuccess).id
  end
  b.finishedAt = finishedAt
  b.updatedAt = finishedAt
  for _, call in ipairs(calls) do
    insertCallback(b, call[1], call[2], finishedAt)
  end
end

-- Batch.afterItemWrite: the item's count moves from its old state to its new one, its spend change joins the
-- batch's cost, then the finishing rule, all at the item write's time.
batchWrite = function(old, new)
  local delta = (new.costCents or 0) - (old.costCents or 0)
  if old.state == new.state and delta == 0 then
    return
  end
  local b = loadBatch(new.batchId)
  if b == nil then
    return
  end
  local at = new.updatedAt
  b[old.state] = b[old.state] - 1
  b[new.state] = b[new.state] + 1
  b.costCents = b.costCents + delta
  b.updatedAt = math.max(b.updatedAt, at)
  finishBatch(b, at)
  storeBatch(b)
end

-- Sends the index writes and count deltas a script gathered (`flushIndexes`, `flushCounts`), then publishes what
-- it wrote on the queue's sharded channel: "q" (something is queued) or "w", then the ids. Watchers re-read the
-- records; receivers look for deliveries.
local function publishWrites()
  flushIndexes()
  flushCounts()
  if #written == 0 then
    return
  end
  local head = "w"
  if wokeQueue then
    head = "q"
  end
  redis.call("SPUBLISH", base .. K.events, head .. " " .. table.concat(written, " "))
end

-- `n` is the row's length: a Lua table constructor with nils has no reliable length of its own.
local function encodeRow(n, values)
  local out = {}
  for i = 1, n do
    local v = values[i]
    if v == nil or v == NULL then
      out[i] = cjson.null
    elseif type(v) == "number" then
      out[i] = fmt(v)
    else
      out[i] = v
    end
  end
  return cjson.encode(out)
end

local function decodeText(v)
  if v == cjson.null then
    return nil
  end
  return v
end

local function decodeNumber(v)
  if v == cjson.null then
    return nil
  end
  return tonumber(v)
end

-- Ledger rows: callId -> [seq, token, amountCents, settled ("1"/"0"), createdAt, updatedAt].
local function decodeCharge(callId, raw)
  local row = cjson.decode(raw)
  return {
    seq = tonumber(row[1]),
    callId = callId,
    token = tonumber(row[2]),
    amountCents = tonumber(row[3]),
    settled = row[4] == "1",
    createdAt = tonumber(row[5]),
    updatedAt = tonumber(row[6])
  }
end

local function encodeCharge(row)
  local settled = "0"
  if row.settled then
    settled = "1"
  end
  return encodeRow(6, { row.seq, row.token, row.amountCents, settled, row.createdAt, row.updatedAt })
end

-- The job's ledger rows in insertion order.
local function chargesOf(id)
  local raw = redis.call("HGETALL", chargesKey(id))
  local rows = {}
  for i = 1, #raw, 2 do
    rows[#rows + 1] = decodeCharge(raw[i], raw[i + 1])
  end
  table.sort(rows, function(a, b)
    return a.seq < b.seq
  end)
  return rows
end

-- What the job's ledger rows add up to per attempt: token -> cents, summed in insertion order.
local function spendByToken(id)
  local spent = {}
  for _, row in ipairs(chargesOf(id)) do
    spent[row.token] = (spent[row.token] or 0) + row.amountCents
  end
  return spent
end

-- Attempt rows: token -> [worker, startedAt, endedAt, outcome, errorClass, evidence].
local function endAttempt(job, stop, now)
  local key = attemptsKey(job.id)
  local field = fmt(stop.token)
  local raw = redis.call("HGET", key, field)
  if not raw then
    return
  end
  local row = cjson.decode(raw)
  if row[4] ~= "running" then
    return
  end
  redis.call("HSET", key, field, encodeRow(6, { row[1], row[2], now, stop.outcome, stop.errorClass, stop.evidence }))
  -- The attempt's ledger rows so far now count under its class; later rows of its token join in `charge`.
  if stop.errorClass ~= nil and stop.errorClass ~= NULL then
    local spent = spendByToken(job.id)[tonumber(stop.token)] or 0
    for _, k in ipairs(costKeys(job)) do
      addSum(k, stop.errorClass, 1, spent)
    end
  end
end

-- The class an ended attempt of the job ended with, or nil (no such attempt, still running, or no class).
local function endedClass(id, token)
  local raw = redis.call("HGET", attemptsKey(id), token)
  if not raw then
    return nil
  end
  local row = cjson.decode(raw)
  if row[4] == "running" then
    return nil
  end
  return decodeText(row[5])
end

local function startAttempt(id, start, now)
  redis.call("HSET", attemptsKey(id), fmt(start.token), encodeRow(6, { start.worker, now, nil, "running", nil, nil }))
end

-- Stores a transition of `old` at `now`; `retentionMs` (nil: keep) is how long a finished job's input and
-- result outlive it. Returns the new record.
local function apply(old, now, tr, retentionMs)
  local new = tr.job
  if tr.stop ~= nil then
    endAttempt(old, tr.stop, now)
  end
  if tr.start ~= nil then
    startAttempt(old.id, tr.start, now)
  end
  -- The fields this write may change: the patch's, updatedAt, and the store's marks set here.
  local names = { "updatedAt" }
  for name, _ in pairs(tr.patch) do
    names[#names + 1] = name
  end
  if tr.becameFailed then
    new.failedAt = now
    names[#names + 1] = "failedAt"
  end
  -- A job queued again is deliverable again: a transport's hiding belongs to the delivery it was made for.
  if new.state == "queued" and old.state ~= "queued" then
    new.visibleAt = nil
    names[#names + 1] = "visibleAt"
  end
  save(old, new, names)
  if tr.result ~= nil then
    redis.call("HSET", dataKey(old.id), "r", tr.result)
  end
  if retentionMs ~= nil and (new.state == "succeeded" or new.state == "abandoned") then
    redis.call("PEXPIRE", dataKey(old.id), retentionMs)
  end
  touched(new)
  return new
end

-- Deletes a job and every trace of it in the queue: index entries, sums, its request key, its keys. Its route
-- lives in another slot: the caller deletes it.
local function removeJob(job)
  local member = memberOf(job)
  for key, _ in pairs(entries(job)) do
    redis.call("ZREM", key, member)
  end
  movePriorities(job, nil)
  moveWaiting(job, nil)
  moveSums(job, nil)
  moveCounts(job, nil)
  -- Its ended attempts leave the error-class cost sums.
  local spent = spendByToken(job.id)
  for _, token in ipairs(redis.call("HKEYS", attemptsKey(job.id))) do
    local class = endedClass(job.id, token)
    if class ~= nil then
      for _, k in ipairs(costKeys(job)) do
        addSum(k, class, -1, -(spent[tonumber(token)] or 0))
      end
    end
  end
  unindexCharges(job)
  if job.requestKey ~= nil then
    local field = requestKeyField(job.tenant, job.requestKey)
    if redis.call("HGET", base .. K.requestKeys, field) == job.id then
      redis.call("HDEL", base .. K.requestKeys, field)
    end
  end
  redis.call("UNLINK", jobKey(job.id), dataKey(job.id), attemptsKey(job.id), chargesKey(job.id))
end
