-- A fair grant in Redisson's layout: the lock as in its fenced lock, granted only to the
-- waiter at the head of Redisson's queue. KEYS: the lock, its counter of grants,
-- distlock's records of its holders, the queue, its deadlines, when distlock's waiters
-- were last heard from. ARGV: the lease (ms), the holder's field, the request's record
-- (JSON; the grant's token is appended as `f`), how long a waiter may take to claim its
-- turn (ms, Redisson's thread wait time), 1 to queue when not granted (0: a try), how
-- long a distlock waiter counts as heard from (ms), the channel prefix waiters are woken
-- on.
-- Answers {1, token} when granted, {0, ms} while queued (ms: how long the wait ahead is
-- expected to last), {0, -1} while a hash without a TTL stands there, {-1, 0} when the key
-- is not a lock hash.
local lock, counter, records = KEYS[1], KEYS[2], KEYS[3]
local queue, deadlines, heard = KEYS[4], KEYS[5], KEYS[6]
local lease, field, record = ARGV[1], ARGV[2], ARGV[3]
local turn, queued, heard_for, channel = tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7]
local now = server_now()
local head = live_head(queue, deadlines, heard, now)
local left = redis.call('PTTL', lock)
if left == -2 and head and head ~= field then
  -- Free, with a waiter ahead that may not have heard: tell it again (a distlock waiter
  -- nobody hears leaves the queue).
  wake_head(channel, queue, deadlines, heard, now, field)
  head = redis.call('LINDEX', queue, 0)
end
if left == -2 and (not head or head == field) then
  if head then
    redis.call('LPOP', queue)
    redis.call('ZREM', deadlines, field)
    redis.call('ZREM', heard, field)
    -- Every waiter behind moved up one turn: its deadline comes a turn sooner.
    for _, waiter in ipairs(redis.call('ZRANGE', deadlines, 0, -1)) do
      redis.call('ZINCRBY', deadlines, -turn, waiter)
    end
  end
  local token = redis.call('INCR', counter)
  redis.call('HSET', lock, field, 1)
  redis.call('PEXPIRE', lock, lease)
  redis.call('HSET', records, field, string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', token) .. '"}')
  redis.call('PEXPIRE', records, lease)
  return {1, token}
end
if left ~= -2 then
  if redis.call('TYPE', lock).ok ~= 'hash' then
    return {-1, 0}
  end
  if left > 0 and redis.call('HEXISTS', lock, field) == 1 then
    -- This request's own grant, asked for again (its answer was lost): the same token.
    redis.call('PEXPIRE', lock, lease)
    redis.call('PEXPIRE', records, lease)
    return {1, tonumber(redis.call('GET', counter)) or 0}
  end
end
if not queued then
  return {0, math.max(left, 1)}
end
-- Queued, or queued now at the tail; the deadline follows the waiter ahead's as
-- Redisson's does (its deadline and a turn more; at the head, the holder's lease left and
-- a turn), set again at every poll so it never passes while this waiter lives.
local place = redis.call('LPOS', queue, field)
local ahead
if place then
  ahead = place > 0 and redis.call('LINDEX', queue, place - 1) or nil
else
  ahead = redis.call('LINDEX', queue, -1)
  redis.call('RPUSH', queue, field)
end
local ahead_deadline = ahead and tonumber(redis.call('ZSCORE', deadlines, ahead))
local deadline = (ahead_deadline or now + math.max(left, 0)) + turn
redis.call('ZADD', deadlines, deadline, field)
redis.call('ZADD', heard, now + heard_for, field)
redis.call('PEXPIRE', heard, heard_for)
if left == -1 then
  return {0, -1}
end
return {0, math.max(deadline - turn - now, 1)}
