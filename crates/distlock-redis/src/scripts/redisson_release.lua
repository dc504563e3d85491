-- An unlock in Redisson's layout. KEYS: the lock, its release channel, this unlock's
-- latch, the fair lock's queue, its deadlines, when distlock's waiters last polled. ARGV:
-- the holder's field, how long the latch keeps the answer (ms), the lease (ms) for a hold
-- that is left, how long a distlock fair waiter counts as alive after a poll (ms), after
-- how long without a poll one nobody hears counts as gone (ms).
-- Answers 1 when released (the hash, distlock's record of the holder with it, deleted;
-- the release published on the channel, and on the channel of the fair queue's head if a
-- fair waiter waits), 0 when a hold of the same field is left, -1 when the field holds
-- nothing; an unlock asked again answers as it did the first time while its latch lives.
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local queue = KEYS[4]
local field, keep, lease = ARGV[1], ARGV[2], ARGV[3]
local answered = redis.call('GET', latch)
if answered then
  return tonumber(answered)
end
-- No field, or no hash (another layout's key): nothing of this holder.
local count = tonumber(redis.pcall('HGET', lock, field))
if not count then
  return -1
end
if count > 1 then
  redis.call('HINCRBY', lock, field, -1)
  redis.call('PEXPIRE', lock, lease)
  redis.call('SET', latch, 0, 'PX', keep)
  return 0
end
redis.call('DEL', lock)
redis.call('PUBLISH', channel, '0')
if redis.call('EXISTS', queue) == 1 then
  wake_head(fair_queue(queue, KEYS[5], KEYS[6], ARGV[4], ARGV[5]), channel, nil)
end
redis.call('SET', latch, 1, 'PX', keep)
return 1
