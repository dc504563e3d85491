-- Counts the fencing token of a grant the client's first try made where the counter was
-- never seeded (see first_try.rs): seeds it, as `next_fence` in helpers.lua does, at the
-- server's clock in microseconds. KEYS[1] the fencing counter; ARGV[1] its lifetime (ms).
-- Returns the token.
local fence = redis.call('INCR', KEYS[1])
if fence < 1e12 then
  local t = redis.call('TIME')
  fence = t[1] * 1000000 + math.floor(t[2] / 1000) * 1000
  redis.call('SET', KEYS[1], string.format('%d%08d', math.floor(fence / 1e8), fence % 1e8), 'PX', ARGV[1])
end
return fence
