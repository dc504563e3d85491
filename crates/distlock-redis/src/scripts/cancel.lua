-- Withdraw a request: its queue entry, and any grant made under its token; then wake the
-- head waiter, which may now go first.  ARGV[1] token.
redis.call('ZREM', QUEUE, ARGV[1])
redis.call('HDEL', WAITERS, ARGV[1])
delete_grant(ARGV[1])
wake_head()
return 1
