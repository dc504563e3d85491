-- Runs as the function `try_grant` of redisson_granted.lua, which takes the last two KEYS
-- and the last ARGV (the waiter's record for `status`, dropped on a grant).
-- A grant in Redisson's fenced-lock layout. KEYS: the lock (a hash of its holder's field
-- and hold count, the lease its TTL), its counter of grants. ARGV: the lease (ms), the
-- holder's field, the field of distlock's record of the holder (in the same hash, for
-- `status`; Java clients read only their own fields), the request's record (JSON; the
-- grant's token is appended as `f`).
-- Answers {1, token} when granted, {0, ms} while another holds it for ms more, {0, -1}
-- while a hash without a TTL stands there (never taken for a grant), {-1, 0} when the key
-- is not a lock hash (another client's layout), {-2, 0} when it is a read-write lock's.
local lock, counter = KEYS[1], KEYS[2]
local lease, field, record_field, record = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local left = redis.call('PTTL', lock)
if left == -2 then
  return {1, grant(lock, counter, lease, field, record_field, record)}
end
return standing(lock, counter, lease, field, left) or {0, left}
