-- RedLock: stamp a grant with the token its majority agreed on. Raises the lock's fencing
-- counter to at least ARGV[1] (so any later majority, which shares a master with this one,
-- counts on from it) and, if the holder record is the grant's (ARGV[2] its request token),
-- writes that token into it, so every master shows the token the holder was given.
-- KEYS[1] the fencing counter, KEYS[2] the holder record. Returns the counter.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  current = floor
end
local raw = redis.call('GET', KEYS[2])
if raw then
  local record = cjson.decode(raw)
  if record.t == ARGV[2] and record.f ~= ARGV[1] then
    record.f = ARGV[1]
    redis.call('SET', KEYS[2], cjson.encode(record), 'KEEPTTL')
  end
end
return current
