-- Raise a lock's fencing counter to at least ARGV[1] (RedLock: the token a quorum granted,
-- so any later quorum, which shares a master with this one, counts on from it).
-- KEYS[1] the fencing counter. Returns the counter.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  return floor
end
return current
