-- A renewal in Redisson's layout, as its watchdog makes one. KEYS: the lock. ARGV: the
-- holder's field, the lease (ms). Answers 1 when renewed, 0 when the field holds nothing
-- (or the key is no hash: another layout's).
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
