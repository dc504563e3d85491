-- A release of permits in Redisson's semaphore layout. KEYS: the semaphore, its channel,
-- distlock's records of its holders, when each stops being renewed, this release's latch.
-- ARGV: the holder's field, how long the latch keeps the answer (ms).
-- Gives the holder's permits back and publishes the permits now available, as Java's
-- release does; a semaphore deleted meanwhile is not made again (its next grant sets it
-- up). Answers 1 when released, -1 when the field holds nothing; a release asked again
-- answers as it did the first time while its latch lives.
local sem, channel, records, renewed, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local field = ARGV[1]
local answered = redis.call('GET', latch)
if answered then
  return tonumber(answered)
end
local mine = redis.call('HGET', records, field)
if not mine then
  return -1
end
redis.call('HDEL', records, field)
redis.call('ZREM', renewed, field)
if redis.call('TYPE', sem).ok == 'string' then
  local value = redis.pcall('INCRBY', sem, tonumber(string.match(mine, '"n":(%d+)')))
  if type(value) == 'number' then
    redis.call('PUBLISH', channel, value)
  end
end
redis.call('SET', latch, 1, 'PX', ARGV[2])
return 1
