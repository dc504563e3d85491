-- Runs as the function `try_grant` of redisson_granted.lua, which takes the last two KEYS
-- and the last ARGV (the waiter's record for `status`, dropped on a grant).
-- A grant of permits in Redisson's semaphore layout. KEYS: the semaphore (a string: the
-- permits available), its channel, its counter of grants, distlock's records of its
-- holders (field -> record), when each of them stops being renewed (a sorted set, server
-- ms). ARGV: the permits asked for, the semaphore's limit, the holder's field, the
-- request's record (JSON; the token is appended as `f`), the lease (ms).
-- A semaphore that does not exist yet is set up as Java's trySetPermits does, to the
-- limit less what distlock's live holders recorded still hold (an operator may have
-- deleted it under them); the records of holders that stopped renewing go with the old
-- count. Answers {1, token} when granted (or when asked again for a
-- grant it made), {0, available} while too few permits are left, {-1, 0} when the key is
-- no semaphore (another layout's key).
local sem, channel, counter, records, renewed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local permits, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local field, record, lease = ARGV[3], ARGV[4], tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local shape = redis.call('TYPE', sem).ok
if shape ~= 'string' and shape ~= 'none' then
  return {-1, 0}
end
local mine = redis.call('HGET', records, field)
if mine then
  return {1, tonumber(string.match(mine, '"f":"(%d+)"')) or 0}
end
local available
if shape == 'none' then
  -- Holders that stopped renewing are dropped with the count they were in: their release,
  -- if it comes, finds no record and gives nothing back to the new count.
  for _, stopped in ipairs(redis.call('ZRANGEBYSCORE', renewed, '-inf', '(' .. now)) do
    redis.call('HDEL', records, stopped)
    redis.call('ZREM', renewed, stopped)
  end
  local held = 0
  for _, live in ipairs(redis.call('ZRANGEBYSCORE', renewed, now, '+inf')) do
    local other = redis.call('HGET', records, live)
    held = held + (other and tonumber(string.match(other, '"n":(%d+)')) or 0)
  end
  available = math.max(limit - held, 0)
  redis.call('SET', sem, available)
  redis.call('PUBLISH', channel, available)
else
  available = tonumber(redis.call('GET', sem))
  if not available then
    return {-1, 0}
  end
end
if available < permits then
  return {0, available}
end
redis.call('DECRBY', sem, permits)
local token = redis.call('INCR', counter)
redis.call('HSET', records, field,
  string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', token) .. '"}')
redis.call('ZADD', renewed, now + lease, field)
return {1, token}
