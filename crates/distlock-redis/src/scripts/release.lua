-- Delete the lock if it is still ours, then wake the head waiter.
-- KEYS[1] lock  KEYS[2] queue  KEYS[3] waiter info  KEYS[4] holder info
-- ARGV[1] token.  Returns 1 if released, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[4])
wake_head(KEYS[2], KEYS[3])
return 1
