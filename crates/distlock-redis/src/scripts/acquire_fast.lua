-- The acquire fast path, a script of its own (a client with `first_try=commands` tries
-- with plain commands instead, but on a RedLock master: see first_try.rs): an exclusive
-- request (mutex or write) that nobody queued, on a free lock that nobody waits for or
-- shares, the common case. Every
-- key, argument and command here is paid for on every uncontended cycle, so it takes the
-- fewest that the grant needs, defines no function and decodes no JSON.
-- KEYS: LOCK, FENCE, QUEUE, LEASES (as keys.lua names them).
-- ARGV: ttl_ms; the holder record's head: the request's record (t first) with its closing
--       brace replaced by `,"f":"`, so that the fencing token and `"}` complete it;
--       fence_ttl_ms; for a RedLock master, the least token (the client's clock in
--       microseconds).
-- Returns the grant's fencing token, or -1 where the fast path does not apply (the client
-- then runs acquire.lua).
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) ~= 0 then
  return -1
end
local floor = tonumber(ARGV[4])
if floor then
  -- A RedLock master, whose tokens follow the client's clock: the counter is set to it
  -- in the call that reads what it was. Where it was seeded and behind the clock (all but
  -- always), the clock is the token, as text already; otherwise the token is counted
  -- below, from what the counter was.
  local was = redis.call('SET', KEYS[2], ARGV[4], 'KEEPTTL', 'GET')
  local before = tonumber(was)
  if before and before >= 1e12 and before < floor then
    redis.call('SET', KEYS[1], ARGV[2] .. ARGV[4] .. '"}', 'PX', ARGV[1])
    return floor
  end
  -- Put back as it was (its text: Lua would print a large number in exponent form).
  if was then
    redis.call('SET', KEYS[2], was, 'KEEPTTL')
  else
    redis.call('DEL', KEYS[2])
  end
end
-- As `grant` in acquire.lua: strictly increasing, and a counter that starts afresh starts
-- at the server's clock in microseconds.
local fence = redis.call('INCR', KEYS[2])
-- Below 1e12 the counter was never seeded (see SEEDED_FROM in helpers.lua).
local seeded = fence < 1e12
if seeded then
  local t = redis.call('TIME')
  fence = t[1] * 1000000 + math.floor(t[2] / 1000) * 1000
end
local raised = floor ~= nil and fence < floor
if raised then
  fence = floor
end
-- The token in decimal (seeded, it is past 10^12), printed as two whole numbers that fit
-- the C `long` Lua's '%d' takes on every platform (32 bits on some): '%.0f' would print it
-- too, at the cost of printing a floating-point number, which is most of what formatting
-- costs here.
local text = string.format('%d%08d', math.floor(fence / 1e8), fence % 1e8)
if seeded then
  redis.call('SET', KEYS[2], text, 'PX', ARGV[3])
elseif raised then
  redis.call('SET', KEYS[2], text, 'KEEPTTL')
end
redis.call('SET', KEYS[1], ARGV[2] .. text .. '"}', 'PX', ARGV[1])
return fence
