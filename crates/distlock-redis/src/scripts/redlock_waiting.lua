-- RedLock waiters, for `distlock status` only: masters keep no RedLock queue, so these
-- records never decide a grant. KEYS[1] zset: request token -> expiry (server ms);
-- KEYS[2] hash: request token -> the waiter record the client wrote.
-- ARGV[1] token, ARGV[2] how long the record lives (ms), ARGV[3] the record, or '' to
-- remove it. Expired records of other waiters go too.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('HDEL', KEYS[2], gone)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  local lease = tonumber(ARGV[2])
  redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], lease)
  redis.call('PEXPIRE', KEYS[2], lease)
end
return redis.call('ZCARD', KEYS[1])
