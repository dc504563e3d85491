-- A grant in Redisson's fenced-lock layout. KEYS: the lock (a hash of its holder's field
-- and hold count, the lease its TTL), its counter of grants. ARGV: the lease (ms), the
-- holder's field, the field of distlock's record of the holder (in the same hash, for
-- `status`; Java clients read only their own fields), the request's record (JSON; the
-- grant's token is appended as `f`).
-- Answers {1, token} when granted, {0, ms} while another holds it for ms more, {0, -1}
-- while a hash without a TTL stands there (never taken for a grant), {-1, 0} when the key
-- is not a lock hash (another client's layout).
local lock, counter = KEYS[1], KEYS[2]
local lease, field, record_field, record = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local left = redis.call('PTTL', lock)
if left == -2 then
  local token = redis.call('INCR', counter)
  redis.call('HSET', lock, field, 1, record_field,
    string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', token) .. '"}')
  redis.call('PEXPIRE', lock, lease)
  return {1, token}
end
if redis.call('TYPE', lock).ok ~= 'hash' then
  return {-1, 0}
end
if left > 0 and redis.call('HEXISTS', lock, field) == 1 then
  -- This request's own grant, asked for again (its answer was lost): the same token.
  redis.call('PEXPIRE', lock, lease)
  return {1, tonumber(redis.call('GET', counter)) or 0}
end
return {0, left}
