-- Withdraw a request: its queue entry, and any grant made under its token (a hand-off that
-- reached it as it gave up, say); then pass the lock on (see `hand_on`), to the head
-- waiter, which may now go first.  ARGV[1] token, ARGV[2] fence_ttl_ms.
redis.call('ZREM', QUEUE, ARGV[1])
redis.call('HDEL', WAITERS, ARGV[1])
local held = redis.call('GET', LOCK)
local withdrawn = delete_grant(ARGV[1])
hand_on(withdrawn == 1 and held, ARGV[2])
return 1
