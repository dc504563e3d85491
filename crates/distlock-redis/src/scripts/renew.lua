-- Extend the lock if it is still ours.
-- KEYS[1] lock  KEYS[2] holder info   ARGV[1] token, ARGV[2] ttl_ms.
-- Returns 1 if renewed, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
