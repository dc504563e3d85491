-- Delete our grant, then wake the head waiter.  ARGV[1] token.
-- Returns 1 if released, 0 if the grant was no longer ours.
--
-- This first part is the fast path: our exclusive grant, with nobody queued behind it.
local held = redis.call('GET', LOCK)
if held and string.sub(held, 1, #ARGV[1] + 7) == '{"t":"' .. ARGV[1] .. '"'
    and redis.call('EXISTS', QUEUE) == 0 then
  redis.call('DEL', LOCK)
  return 1
end
