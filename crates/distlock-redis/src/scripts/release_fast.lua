-- Delete our grant, then wake the head waiter.  ARGV[1] token.
-- Returns 1 if released, 0 if the grant was no longer ours.
--
-- This first part is the fast path: our exclusive grant, with nobody queued behind it.
if redis.call('GET', LOCK) == ARGV[1] and redis.call('EXISTS', QUEUE) == 0 then
  redis.call('DEL', LOCK, HOLDER)
  return 1
end
