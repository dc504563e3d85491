-- A renewal in Redisson's read-write layout. KEYS: the lock, distlock's records of its
-- holders, this reader's hold key. ARGV: the holder's field, the lease (ms), `read` or
-- `write`. Answers 1 when renewed; 0 when the field holds nothing, or a reader's hold key
-- has expired (another's unlock may then delete the hash: the hold is gone).
local lock, records, hold = KEYS[1], KEYS[2], KEYS[3]
local field, lease = ARGV[1], tonumber(ARGV[2])
if redis.pcall('HEXISTS', lock, field) ~= 1 then
  return 0
end
if ARGV[3] == 'read' then
  if redis.call('PEXPIRE', hold, lease) == 0 then
    return 0
  end
  if redis.call('PTTL', lock) < lease then
    redis.call('PEXPIRE', lock, lease)
  end
else
  redis.call('PEXPIRE', lock, lease)
end
if redis.call('PTTL', records) < lease then
  redis.call('PEXPIRE', records, lease)
end
return 1
