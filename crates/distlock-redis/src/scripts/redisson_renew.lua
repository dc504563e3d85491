-- A renewal in Redisson's layout, as its watchdog makes one. KEYS: the lock, distlock's
-- records of its holders. ARGV: the holder's field, the lease (ms). Answers 1 when
-- renewed, 0 when the field holds nothing.
local lock = KEYS[1]
if redis.call('TYPE', lock).ok == 'hash' and redis.call('HEXISTS', lock, ARGV[1]) == 1 then
  redis.call('PEXPIRE', lock, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0
