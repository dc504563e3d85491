-- A renewal of permits in Redisson's semaphore layout, which leases none: it only tells
-- `status` the holder lives. KEYS: distlock's records of the semaphore's holders, when
-- each stops being renewed. ARGV: the holder's field, the lease (ms). Answers 1 while the
-- holder's record stands, 0 when it has gone (released).
local records, renewed = KEYS[1], KEYS[2]
if redis.call('HEXISTS', records, ARGV[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', renewed, now + tonumber(ARGV[2]), ARGV[1])
return 1
