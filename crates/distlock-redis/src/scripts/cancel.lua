-- Withdraw a request: its queue entry, and the lock if it was granted under its token;
-- then wake the head waiter, which may now go first.
-- KEYS[1] lock  KEYS[2] queue  KEYS[3] waiter info  KEYS[4] holder info   ARGV[1] token.
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[4])
end
wake_head(KEYS[2], KEYS[3])
return 1
