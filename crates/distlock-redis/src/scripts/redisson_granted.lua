-- Ends a Redisson-layout acquire script, whose body is the function `try_grant`: a grant
-- also drops the waiter's record for `status`. The last two KEYS: distlock's records of
-- the lock's waiters (a sorted set and a hash, by request token); the last ARGV: the
-- request's token, or '' when it has no record.
local answer = try_grant()
local token = ARGV[#ARGV]
if answer[1] == 1 and token ~= '' then
  redis.call('ZREM', KEYS[#KEYS - 1], token)
  redis.call('HDEL', KEYS[#KEYS], token)
end
return answer
