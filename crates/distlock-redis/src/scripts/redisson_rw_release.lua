-- An unlock in Redisson's read-write layout. KEYS: the lock, its release channel, this
-- unlock's latch, distlock's records of its holders, this reader's hold key. ARGV: the
-- holder's field, `read` or `write`, how long the latch keeps the answer (ms), what every
-- reader's hold keys start with. A distlock holder holds once, under a field of its own,
-- and a distlock writer holds the hash alone (it was granted only where none stood).
-- Answers 1 when the lock was let go (the hash deleted; `1` published after the writer,
-- `0` after the last reader), 0 when other readers keep it, -1 when the field holds
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
redis.call('HDEL', lock, field)
redis.call('DEL', hold)

-- The readers left, each with its count of holds and a key per hold numbered from 1:
-- the longest lease among those keys keeps the lock.
local longest = 0
if kind == 'read' then
  for _, other in ipairs(redis.call('HKEYS', lock)) do
    local holds = tonumber(redis.call('HGET', lock, other)) or 0
    for n = 1, holds do
      local left = redis.call('PTTL', prefix .. ':' .. other .. ':rwlock_timeout:' .. n)
      if left > longest then
        longest = left
      end
    end
  end
end
local answer = 1
if longest > 0 then
  redis.call('PEXPIRE', lock, longest)
  answer = 0
else
  redis.call('DEL', lock)
  redis.call('PUBLISH', channel, kind == 'write' and '1' or '0')
end
redis.call('SET', latch, answer, 'PX', keep)
return answer
