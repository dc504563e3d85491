-- Decide a request, granting it if it may go now (the rules of distlock_core::admit).
-- ARGV: token, ttl_ms, record, kind, wait (0|1), fair (0|1), waiter_lease_ms,
--       starvation_ms, wake channel, permits, limit, fence_ttl_ms (the fast-path script
--       takes the first four and fence_ttl_ms: the last argument is always fence_ttl_ms)
-- `record` is the holder record without its fencing token, a JSON object the client wrote:
-- {t, k, n, l, o, h, p, a}, t first; the script appends f (the token) when it grants.
-- Returns {1, fencing_token} when granted, {0, ms until a holder's lease ends or -1,
-- 1 if a foreign client (not distlock) holds the lock, else 0}.
-- A request that may never mix with the current holders fails with "INVALID …".
--
-- This first part is the fast path: an exclusive request on a free lock nobody waits for.
-- It creates no functions or tables, which Redis would pay for on every call; the grant it
-- makes is the one `grant` makes in the general path below. It leaves the grant's fencing
-- token in `fast_fence` for the script it heads to answer: the full script as {1, token},
-- the fast-path script alone as the bare token (-1 when it does not apply).
local token = ARGV[1]
local ttl = tonumber(ARGV[2])
local record = ARGV[3]

local fast_fence
if (ARGV[4] == 'mutex' or ARGV[4] == 'write')
    and redis.call('EXISTS', LOCK, QUEUE, LEASES) == 0 then
  local fence = redis.call('INCR', FENCE)
  if fence == 1 then
    local t = redis.call('TIME')
    fence = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1000
    redis.call('SET', FENCE, string.format('%.0f', fence), 'PX', ARGV[#ARGV])
  end
  redis.call('SET', LOCK, string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', fence) .. '"}', 'PX', ttl)
  fast_fence = fence
end
