-- An unlock in Redisson's read-write layout. KEYS: the lock, its release channel, this
-- unlock's latch, distlock's records of its holders, this reader's hold key. ARGV: the
-- holder's field, `read` or `write`, how long the latch keeps the answer (ms), what every
-- reader's hold keys start with. A distlock holder holds once (its field is its own).
-- Answers 1 when the lock was let go (the hash deleted, `0` published after the last
-- reader, `1` after the writer), 0 when other holds keep it, -1 when the field holds
-- nothing; an unlock asked again answers as it did the first time while its latch lives.
local lock, channel, latch, records, hold = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local field, kind, keep, prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local answered = redis.call('GET', latch)
if answered then
  return tonumber(answered)
end
redis.call('HDEL', records, field)
-- No field, or no hash (another layout's key): nothing of this holder.
if not tonumber(redis.pcall('HGET', lock, field)) then
  return -1
end
local mode = redis.call('HGET', lock, 'mode')

local function answer(value)
  redis.call('SET', latch, value, 'PX', keep)
  return value
end

if kind == 'write' then
  redis.call('HDEL', lock, field)
  if redis.call('HLEN', lock) == 1 then
    redis.call('DEL', lock)
    redis.call('PUBLISH', channel, '1')
  else
    -- Holds of others stay, in read mode, as Redisson's unlock leaves a Java writer's own
    -- read holds.
    redis.call('HSET', lock, 'mode', 'read')
  end
  return answer(1)
end

-- A distlock reader holds once: its field and its one hold key go.
redis.call('HDEL', lock, field)
redis.call('DEL', hold)
if redis.call('HLEN', lock) > 1 then
  -- Other holds stand: the lock lives as long as the longest of them.
  local longest = -3
  for _, other in ipairs(redis.call('HKEYS', lock)) do
    local holds = tonumber(redis.call('HGET', lock, other))
    if holds then
      for n = holds, 1, -1 do
        longest = math.max(longest,
          redis.call('PTTL', prefix .. ':' .. other .. ':rwlock_timeout:' .. n))
      end
    end
  end
  if longest > 0 then
    redis.call('PEXPIRE', lock, longest)
    return answer(0)
  end
  if mode == 'write' then
    return answer(0)
  end
end
redis.call('DEL', lock)
redis.call('PUBLISH', channel, '0')
return answer(1)
