-- An unlock in Redisson's layout. KEYS: the lock, its release channel, this unlock's
-- latch, distlock's records of its holders, the fair lock's queue, its deadlines, when
-- distlock's waiters were last heard from. ARGV: the holder's field, how long the latch
-- keeps the answer (ms), the lease (ms) for a hold that is left.
-- Answers 1 when released (the release published on the channel, and on the channel of
-- the fair queue's head if a fair waiter waits), 0 when a hold of the same field is left,
-- -1 when the field holds nothing; an unlock asked again answers as it did the first
-- time while its latch lives.
local lock, channel, latch, records = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local queue, deadlines, heard = KEYS[5], KEYS[6], KEYS[7]
local field, keep, lease = ARGV[1], ARGV[2], ARGV[3]
local answered = redis.call('GET', latch)
if answered then
  return tonumber(answered)
end
if redis.call('TYPE', lock).ok ~= 'hash' or redis.call('HEXISTS', lock, field) == 0 then
  return -1
end
if redis.call('HINCRBY', lock, field, -1) > 0 then
  redis.call('PEXPIRE', lock, lease)
  redis.call('SET', latch, 0, 'PX', keep)
  return 0
end
redis.call('DEL', lock)
redis.call('HDEL', records, field)
redis.call('PUBLISH', channel, '0')
if redis.call('EXISTS', queue) == 1 then
  wake_head(channel, queue, deadlines, heard, server_now())
end
redis.call('SET', latch, 1, 'PX', keep)
return 1
