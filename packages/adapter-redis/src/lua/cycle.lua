-- cycle: one worker tick on one queue (Store.cycle): settle, then heartbeat, then charge, then claimNext, at one
-- store time, in one script.
-- KEYS[1]: the queue's meta hash; every other key is built from its prefix (one slot).
-- ARGV: now ("" = server TIME), retention ms ("" = keep), the item counts of the settle, heartbeat and charge parts
--       (s, h, c), the claim part's kind ("-" none, "plain", "fair"), then s settle items as in settle.lua (8 values
--       each), h heartbeat items as in heartbeat.lua (4 each), c charge items as in charge.lua (5 each), then the
--       claim part's arguments as claimNext.lua or claimNextFair.lua take them after their retention.
-- Returns: { now, settle results..., heartbeat results..., charge results..., claim results... }, each as the
--          part's own script returns it.
-- Atomic: the four parts run in one script at one `now`, each the code its own script runs, so the results and
--         writes are those of the four scripts one after another at that time. The settle and heartbeat parts
--         gather their index writes, as their scripts do; they are sent before the charge part (whose script sends
--         at once) and the claim part (which reads the ready and lease indexes the settle part moved).
-- @include base
-- @include protocol
-- @include records
-- @include fenced
-- @include claiming
-- @include fairness
-- @include settling
-- @include renewing
-- @include charging
-- @include picking
-- @include fairPicking

local now = storeNow(ARGV[1])
local retentionMs = optNumber(ARGV[2])
local settles = tonumber(ARGV[3])
local renewals = tonumber(ARGV[4])
local charges = tonumber(ARGV[5])
local claimKind = ARGV[6]
local out = { fmt(now) }
local at = 7
deferIndexes()
settleItems(now, retentionMs, at, at + 8 * settles - 1, out)
at = at + 8 * settles
renewItems(now, at, at + 4 * renewals - 1, out)
at = at + 4 * renewals
flushIndexes()
chargeItems(now, at, at + 5 * charges - 1, out)
at = at + 5 * charges
deferIndexes()
if claimKind == "plain" then
  claimNextItems(now, retentionMs, at, out)
elseif claimKind == "fair" then
  claimNextFairItems(now, retentionMs, at, out)
end
publishWrites()
return out
