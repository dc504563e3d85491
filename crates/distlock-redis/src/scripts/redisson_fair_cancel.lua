-- A waiter leaves Redisson's fair-lock queue (it stopped waiting). KEYS: the lock, the
-- queue, its deadlines, when distlock's waiters last polled. ARGV: the waiter's field, a
-- turn (ms), how long a distlock waiter counts as alive after a poll (ms), after how long
-- without a poll one nobody hears counts as gone (ms), the channel prefix waiters are
-- woken on. Every waiter behind it moves up a turn, as when Redisson's own waiter gives
-- up; if the lock is free, the new head is told. Answers 1 when the waiter was queued,
-- else 0.
local lock, field, turn, channel = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[5]
local q = fair_queue(KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4])
local waiters, place = place_of(q, field)
if not place then
  return 0
end
for behind = place + 1, #waiters do
  if redis.call('ZSCORE', q.deadlines, waiters[behind]) then
    redis.call('ZINCRBY', q.deadlines, -turn, waiters[behind])
  end
end
redis.call('LREM', q.queue, 1, field)
redis.call('ZREM', q.deadlines, field)
redis.call('ZREM', q.heard, field)
if redis.call('EXISTS', lock) == 0 then
  wake_head(q, channel, nil)
end
return 1
