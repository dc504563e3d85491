-- The acquire fast path, a script of its own: an exclusive request (mutex or write) on a
-- free lock that nobody waits for or shares, the common case. Every key, argument and
-- command here is paid for on every uncontended cycle, so it takes the fewest that the grant
-- needs, builds no table or function and decodes no JSON.
-- KEYS: LOCK, FENCE, QUEUE, LEASES (as keys.lua names them).
-- ARGV: ttl_ms; the holder record's head: the request's record (t first) with its closing
--       brace replaced by `,"f":"`, so that the fencing token and `"}` complete it;
--       fence_ttl_ms.
-- Returns the grant's fencing token, or -1 where the fast path does not apply (the client
-- then runs the full script).
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) ~= 0 then
  return -1
end
-- As the general path's grant: strictly increasing, and a counter that starts afresh
-- starts at the server's clock in microseconds. '%d' formats a whole number without the
-- floating-point printing '%.0f' pays for.
local fence = redis.call('INCR', KEYS[2])
if fence == 1 then
  local t = redis.call('TIME')
  fence = t[1] * 1000000 + math.floor(t[2] / 1000) * 1000
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
end
redis.call('SET', KEYS[1], ARGV[2] .. string.format('%d', fence) .. '"}', 'PX', ARGV[1])
return fence
