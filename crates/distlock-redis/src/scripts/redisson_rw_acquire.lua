-- Runs as the function `try_grant` of redisson_granted.lua, which takes the last two KEYS
-- and the last ARGV (the waiter's record for `status`, dropped on a grant).
-- A grant of a read or write hold in Redisson's read-write layout. KEYS: the lock (a hash:
-- `mode` read or write, each holder's field and hold count, the lease its TTL), its
-- counter of grants, distlock's records of its holders (field -> record), distlock's
-- waiting writers (request token -> end of its record, server ms), this reader's hold key
-- (the hold's lease its TTL), the lock's release channel. ARGV: the lease (ms), the
-- holder's field (a writer's ends in `:write`), `read` or `write`, the request's record
-- (JSON; the token is appended as `f`), `1` when a writer that finds the lock taken
-- waits, its request token, how long its waiting record lives (ms).
-- Answers {1, token} when granted (or when asked again for a grant it made), {0, ms}
-- while a holder keeps it for ms more, {0, -1} while a hash without a TTL stands there,
-- {0, -3, ms} while a distlock writer waits for it (a reader waits behind it, up to ms),
-- {-1, 0} when the key is no hash, {-2, 0} when it is a hash without `mode` (a plain
-- lock's).
local lock, counter, records, writers, hold = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local channel = KEYS[6]
local lease, field, kind, record = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', writers, '-inf', now)

local shape = redis.call('TYPE', lock).ok
if shape ~= 'hash' and shape ~= 'none' then
  return {-1, 0}
end
local mode = redis.call('HGET', lock, 'mode')
if shape == 'hash' and not mode then
  return {-2, 0}
end
local left = redis.call('PTTL', lock)

-- Keeps distlock's record of the holder (with its token) as long as the lock lives.
local function recorded(token)
  redis.call('HSET', records, field,
    string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', token) .. '"}')
  if redis.call('PTTL', records) < lease then
    redis.call('PEXPIRE', records, lease)
  end
  return token
end

-- A grant asked for again (its answer was lost): the same token, the lease begun again. A
-- read hold of this field whose key expired is gone: its field goes too, and the lock
-- with it when it was the last (writers waiting for it hear so).
if mode and left > 0 and redis.call('HEXISTS', lock, field) == 1 then
  local mine = redis.call('HGET', records, field)
  local token = mine and tonumber(string.match(mine, '"f":"(%d+)"'))
  if token and (kind == 'write' or redis.call('PEXPIRE', hold, lease) == 1) then
    redis.call('PEXPIRE', lock, math.max(left, lease))
    if kind == 'write' then
      redis.call('ZREM', writers, ARGV[6])
    end
    return {1, token}
  end
  if kind == 'read' then
    redis.call('HDEL', lock, field)
    if redis.call('HLEN', lock) <= 1 then
      redis.call('DEL', lock)
      redis.call('PUBLISH', channel, '0')
      mode, left = false, -2
    end
  end
end

if kind == 'write' then
  if not mode then
    redis.call('HSET', lock, 'mode', 'write', field, 1)
    redis.call('PEXPIRE', lock, lease)
    redis.call('ZREM', writers, ARGV[6])
    return {1, recorded(redis.call('INCR', counter))}
  end
  if ARGV[5] == '1' then
    local keep = tonumber(ARGV[7])
    redis.call('ZADD', writers, now + keep, ARGV[6])
    if redis.call('PTTL', writers) < keep then
      redis.call('PEXPIRE', writers, keep)
    end
  end
  return {0, left}
end

if mode == 'write' or left == -1 then
  return {0, left}
end
local first = redis.call('ZRANGE', writers, 0, 0, 'WITHSCORES')
if first[2] then
  return {0, -3, tonumber(first[2]) - now}
end
if not mode then
  redis.call('HSET', lock, 'mode', 'read')
end
redis.call('HINCRBY', lock, field, 1)
redis.call('SET', hold, 1, 'PX', lease)
redis.call('PEXPIRE', lock, math.max(left, lease))
return {1, recorded(redis.call('INCR', counter))}
