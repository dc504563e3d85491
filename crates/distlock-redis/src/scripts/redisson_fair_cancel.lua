-- A waiter leaves Redisson's fair-lock queue (it stopped waiting). KEYS: the lock, the
-- queue, its deadlines, when distlock's waiters were last heard from. ARGV: the waiter's
-- field, a turn (ms), the channel prefix waiters are woken on. Every waiter behind it
-- moves up a turn, as when Redisson's own waiter gives up; if the lock is free, the new
-- head is told. Answers 1 when the waiter was queued, else 0.
local lock, queue, deadlines, heard = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local field, turn, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local place = redis.call('LPOS', queue, field)
if not place then
  return 0
end
for _, waiter in ipairs(redis.call('LRANGE', queue, place + 1, -1)) do
  if redis.call('ZSCORE', deadlines, waiter) then
    redis.call('ZINCRBY', deadlines, -turn, waiter)
  end
end
redis.call('LREM', queue, 1, field)
redis.call('ZREM', deadlines, field)
redis.call('ZREM', heard, field)
if redis.call('EXISTS', lock) == 0 then
  wake_head(channel, queue, deadlines, heard, server_now())
end
return 1
