-- Delete our grant, then wake the head waiter.  ARGV[1] token.
-- Returns 1 if released, 0 if the grant was no longer ours.
--
-- This first part is the fast path: our exclusive grant, with nobody queued behind it.
local released = 0
if redis.call('GET', LOCK) == ARGV[1] then
  redis.call('DEL', LOCK, HOLDER)
  released = 1
  if redis.call('EXISTS', QUEUE) == 0 then return 1 end
end
