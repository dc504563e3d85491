-- Counts the fencing token of a grant the client's first try made where the counter was
-- never seeded (see first_try.rs), if the lock is still the request's: seeds the counter,
-- as `next_fence` in helpers.lua does, at the server's clock in microseconds. KEYS[1] the fencing counter, KEYS[2] the lock; ARGV[1] the
-- counter's lifetime (ms), ARGV[2] how the request's holder record starts, `{"t":"<token>"`.
-- Returns the token, or -1 where the lock is no longer the request's (it expired, or was
-- broken): the full script decides then.
local held = redis.call('GET', KEYS[2])
if not held or string.sub(held, 1, #ARGV[2]) ~= ARGV[2] then
  return -1
end
local fence = redis.call('INCR', KEYS[1])
local seeded = fence < 1e12
if seeded then
  local t = redis.call('TIME')
  fence = t[1] * 1000000 + math.floor(t[2] / 1000) * 1000
end
if seeded then
  -- Past 10^12: printed as two whole numbers that fit the C `long` Lua's '%d' takes.
  redis.call('SET', KEYS[1], string.format('%d%08d', math.floor(fence / 1e8), fence % 1e8), 'PX', ARGV[1])
end
return fence
